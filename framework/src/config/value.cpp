#include "tp/framework/config/value.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "tp/framework/config/secrets.h"
#include "tp/framework/config/toml_text.h"

namespace tp {
namespace {

bool is_array_type(ValueType type) {
  return type == ValueType::IntArray || type == ValueType::FloatArray ||
         type == ValueType::StringArray;
}

bool element_matches(const toml::node& node, ValueType array_type) {
  switch (array_type) {
    case ValueType::IntArray: return node.is_integer();
    case ValueType::FloatArray: return node.is_floating_point() || node.is_integer();
    case ValueType::StringArray: return node.is_string();
    default: return false;
  }
}

std::string_view plural_phrase(toml::node_type type) {
  switch (type) {
    case toml::node_type::boolean: return "booleans";
    case toml::node_type::integer: return "integers";
    case toml::node_type::floating_point: return "floats";
    case toml::node_type::string: return "strings";
    case toml::node_type::array: return "arrays";
    case toml::node_type::table: return "tables";
    default: return "dates and times";
  }
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

bool parse_value_into(toml::table& dst, std::string_view key, std::string_view literal,
                      std::string_view origin, std::string* error) {
  // A literal is parsed as the document "v = <literal>"; a literal that smuggles in a newline and
  // a second key or table is refused by the size check.
  std::string document = "v = ";
  document.append(literal);
  document += '\n';
  toml::table parsed;
  try {
    parsed = parse_toml(document, origin);
  } catch (const toml::parse_error& e) {
    if (error != nullptr) *error = std::string(e.description());
    return false;
  }
  toml::node* node = parsed.get("v");
  if (parsed.size() != 1 || node == nullptr) {
    if (error != nullptr) *error = "expected exactly one value";
    return false;
  }
  // Moving keeps the node's source region, whose path is `origin`.
  node->visit([&](auto& concrete) { dst.insert_or_assign(key, std::move(concrete)); });
  return true;
}

namespace {

/// `text` as a TOML basic string literal.
std::string quote(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(ch));
      out += escaped;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace

void set_value_or_string(toml::table& dst, std::string_view key, std::string_view text, std::string_view origin) {
  if (!parse_value_into(dst, key, text, origin)) parse_value_into(dst, key, quote(text), origin);
}

toml::table* ensure_tables(toml::table& root, std::string_view tables, const toml::node** blocked) {
  toml::table* table = &root;
  while (!tables.empty()) {
    const std::size_t dot = tables.find('.');
    const std::string part(tables.substr(0, dot));
    tables.remove_prefix(dot == std::string_view::npos ? tables.size() : dot + 1);
    if (!table->contains(part)) table->insert_or_assign(part, toml::table{});
    toml::table* inner = table->get_as<toml::table>(part);
    if (inner == nullptr) {
      if (blocked != nullptr) *blocked = table->get(part);
      return nullptr;
    }
    table = inner;
  }
  return table;
}

bool matches_type(const toml::node& node, ValueType type) {
  switch (type) {
    case ValueType::Bool: return node.is_boolean();
    case ValueType::Int: return node.is_integer();
    case ValueType::Float: return node.is_floating_point() || node.is_integer();
    case ValueType::String: return node.is_string();
    default: break;
  }
  const toml::array* array = node.as_array();
  if (array == nullptr || !is_array_type(type)) return false;
  return std::all_of(array->begin(), array->end(),
                     [&](const toml::node& element) { return element_matches(element, type); });
}

void coerce_to_type(toml::table& parent, std::string_view key, ValueType type) {
  toml::node* node = parent.get(key);
  if (node == nullptr) return;
  if (type == ValueType::Float && node->is_integer()) {
    const auto value = static_cast<double>(node->as_integer()->get());
    parent.insert_or_assign(key, value);
  } else if (type == ValueType::FloatArray && node->is_array()) {
    toml::array floats;
    for (const toml::node& element : *node->as_array()) {
      floats.push_back(element.is_integer() ? static_cast<double>(element.as_integer()->get())
                                            : element.value_or(0.0));
    }
    parent.insert_or_assign(key, std::move(floats));
  }
}

std::string describe_node(const toml::node& node) {
  std::ostringstream out;
  switch (node.type()) {
    case toml::node_type::string: {
      // Redacted before it is cut: a cut inside a URI's authority would hide the '@' that marks
      // its password, and a value of the wrong type may be a secret all the same.
      std::string text = redact_uri_credentials(node.as_string()->get());
      if (text.size() > 40) text = text.substr(0, 37) + "...";
      out << "a string (\"" << text << "\")";
      break;
    }
    case toml::node_type::integer: out << "an integer (" << node.as_integer()->get() << ")"; break;
    case toml::node_type::floating_point:
      out << "a float (" << node.as_floating_point()->get() << ")";
      break;
    case toml::node_type::boolean:
      out << "a boolean (" << (node.as_boolean()->get() ? "true" : "false") << ")";
      break;
    case toml::node_type::table: out << "a table"; break;
    case toml::node_type::array: {
      const toml::array& array = *node.as_array();
      if (array.empty()) {
        out << "an empty array";
      } else if (array.is_homogeneous()) {
        out << "an array of " << plural_phrase(array.front().type());
      } else {
        out << "an array of mixed types";
      }
      break;
    }
    case toml::node_type::date: out << "a date"; break;
    case toml::node_type::time: out << "a time"; break;
    case toml::node_type::date_time: out << "a date-time"; break;
    case toml::node_type::none: out << "nothing"; break;
  }
  return out.str();
}

std::string node_origin(const toml::node& node, std::string_view fallback_file) {
  const toml::source_region& source = node.source();
  if (source.path && (starts_with(*source.path, kSetOriginPrefix) ||
                      starts_with(*source.path, kEnvOriginPrefix))) {
    return *source.path;
  }
  std::string file(fallback_file);
  if (source.path && !source.path->empty()) file = *source.path;
  if (file.empty()) file = "config";
  if (source.begin.line == 0) return file;
  return file + ":" + std::to_string(source.begin.line) + ":" +
         std::to_string(source.begin.column);
}

std::string resolve_config_path(const toml::node& node, std::string_view source_file) {
  std::string value = node.value_or(std::string());
  if (value.empty() || std::filesystem::path(value).is_absolute()) return value;
  // A URI (s3://, http://) is no file path: resolving it would mangle it, credentials and all,
  // past redact_uri_credentials.
  if (const auto scheme_end = value.find("://"); scheme_end != std::string::npos && scheme_end > 0 &&
      std::isalpha(static_cast<unsigned char>(value[0])) != 0 &&
      std::all_of(value.begin(), value.begin() + static_cast<std::ptrdiff_t>(scheme_end), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '+' || c == '.' || c == '-';
      }))
    return value;
  const toml::source_region& source = node.source();
  const std::string origin = source.path ? *source.path : std::string();
  if (origin == "default") return value;
  // A --set or environment value is relative to the working directory, like any shell argument;
  // made absolute here so that the run's config.toml, read later from elsewhere, still names it.
  if (starts_with(origin, kSetOriginPrefix) || starts_with(origin, kEnvOriginPrefix))
    return std::filesystem::absolute(value).lexically_normal().string();
  const std::string file = origin.empty() ? std::string(source_file) : origin;
  if (file.empty()) return value;
  return std::filesystem::absolute(std::filesystem::path(file).parent_path() / value).lexically_normal().string();
}

bool choice_allows(const KeySpec& spec, std::string_view value) {
  if (spec.choices.empty()) return true;
  for (const std::string& choice : spec.choices) {
    if (choice.size() >= 2 && choice.ends_with(":N")) {
      const std::string_view prefix = std::string_view(choice).substr(0, choice.size() - 1);
      const std::string_view rest = value.substr(std::min(prefix.size(), value.size()));
      if (starts_with(value, prefix) && !rest.empty() &&
          std::all_of(rest.begin(), rest.end(),
                      [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)) != 0; })) {
        return true;
      }
    } else if (choice == value) {
      return true;
    }
  }
  return false;
}

std::string choices_phrase(const KeySpec& spec) {
  std::string phrase;
  for (std::size_t i = 0; i < spec.choices.size(); ++i) {
    if (i > 0) phrase += i + 1 == spec.choices.size() ? " or " : ", ";
    phrase += spec.choices[i];
  }
  return phrase;
}

}  // namespace tp
