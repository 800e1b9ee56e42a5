#include "tp/framework/config/write.h"

#include <sstream>

#include "tp/framework/config/secrets.h"

namespace tp {
namespace {

// Every string of `node` (a table or an array, recursively) through redact_uri_credentials.
void redact_strings(toml::node& node) {
  if (auto* text = node.as_string()) {
    text->get() = redact_uri_credentials(text->get());
  } else if (auto* table = node.as_table()) {
    for (auto&& [key, value] : *table) redact_strings(value);
  } else if (auto* array = node.as_array()) {
    for (toml::node& element : *array) redact_strings(element);
  }
}

std::string format(const toml::table& table, toml::format_flags flags) {
  std::ostringstream out;
  out << toml::toml_formatter{table, flags} << '\n';
  return out.str();
}

}  // namespace

std::string to_toml_text(const toml::table& config) {
  // The text is written (config.toml, train.log, checkpoints) and sent (MLflow's params): a URI's
  // credentials stay in memory (secrets.h).
  toml::table table = config;
  redact_strings(table);
  // Sub-tables stay flush left, as people write them.
  const toml::format_flags flags =
      toml::toml_formatter::default_flags & ~toml::format_flags::indent_sub_tables;
  // Full precision prints 0.9 as 0.90000000000000002. Short floats read better, but six digits
  // lose some values, so the short text is used only when it parses back to the same table
  // (costs one extra parse of a small document).
  std::string text = format(table, flags | toml::format_flags::relaxed_float_precision);
  try {
    if (toml::parse(std::string_view(text)) == table) return text;
  } catch (const toml::parse_error&) {
    // Fall through to the exact form.
  }
  return format(table, flags);
}

std::string toml_basic_string(std::string_view text) {
  // Literal ('...') and multi-line strings off: one line, in the double quotes people expect.
  const toml::format_flags flags = toml::toml_formatter::default_flags & ~toml::format_flags::allow_literal_strings &
                                   ~toml::format_flags::allow_multi_line_strings;
  std::ostringstream out;
  out << toml::toml_formatter{toml::value<std::string>(std::string(text)), flags};
  return out.str();
}

}  // namespace tp
