#include "tp/framework/config/flatten.h"

#include <charconv>
#include <cmath>
#include <sstream>

#include "tp/framework/config/schema.h"
#include "tp/framework/config/secrets.h"

namespace tp {
namespace {

std::string float_literal(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, ec == std::errc{} ? end : buffer);
  // A float keeps a point or an exponent, so 1.0 never reads as the integer 1.
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

FlatValue leaf(const toml::node& node) {
  if (const auto* s = node.as_string()) {
    // Flat values are written (TensorBoard's hparams, MLflow's params) and compared with
    // config.toml's, whose URIs hold no credentials (secrets.h).
    std::string text = redact_uri_credentials(s->get());
    return {quoted(text), text, toml::node_type::string};
  }
  if (const auto* f = node.as_floating_point()) {
    const std::string text = float_literal(f->get());
    return {text, text, toml::node_type::floating_point};
  }
  if (const auto* i = node.as_integer()) {
    const std::string text = std::to_string(i->get());
    return {text, text, toml::node_type::integer};
  }
  if (const auto* b = node.as_boolean()) {
    const std::string text = b->get() ? "true" : "false";
    return {text, text, toml::node_type::boolean};
  }
  if (const auto* array = node.as_array()) {
    FlatValue out{"[", "[", toml::node_type::array};
    for (std::size_t i = 0; i < array->size(); ++i) {
      const FlatValue element = leaf(*array->get(i));
      out.literal += (i ? ", " : "") + element.literal;
      out.display += (i ? ", " : "") + element.display;
    }
    out.literal += "]";
    out.display += "]";
    return out;
  }
  // Dates, times and tables inside mixed arrays: TOML++'s own text.
  std::ostringstream text;
  node.visit([&](const auto& n) { text << n; });
  return {text.str(), text.str(), node.type()};
}

bool all_tables(const toml::array& array) {
  if (array.empty()) return false;
  for (const toml::node& element : array)
    if (!element.is_table()) return false;
  return true;
}

void flatten_into(const toml::table& table, const std::string& prefix, FlatConfig& out) {
  for (const auto& [key, node] : table) {
    const std::string path = prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const auto* sub = node.as_table()) {
      flatten_into(*sub, path, out);
    } else if (const auto* array = node.as_array(); array != nullptr && all_tables(*array)) {
      for (std::size_t i = 0; i < array->size(); ++i)
        flatten_into(*array->get(i)->as_table(), path + "[" + std::to_string(i) + "]", out);
    } else {
      out[path] = leaf(node);
    }
  }
}

}  // namespace

FlatConfig flatten_config(const toml::table& table) {
  FlatConfig out;
  flatten_into(table, "", out);
  return out;
}

const std::set<std::string>& run_location_keys() {
  static const std::set<std::string> keys{"run.output_dir", "plugins.dirs", "logging.mlflow.parent_run_id"};
  return keys;
}

FlatConfig with_host_defaults(FlatConfig flat) {
  for (const KeySpec& spec : host_key_schema()) {
    if (spec.default_literal.empty() || flat.count(spec.path) != 0) continue;
    const toml::table parsed = toml::parse("value = " + spec.default_literal);
    const toml::node& node = *parsed.get("value");
    // A Float key's integer default ("0") is written as a float in config.toml (0.0).
    if (spec.type == ValueType::Float && node.is_integer())
      flat[spec.path] = leaf(toml::value<double>(static_cast<double>(node.as_integer()->get())));
    else
      flat[spec.path] = leaf(node);
  }
  return flat;
}

std::set<std::string> differing_keys(const FlatConfig& a, const FlatConfig& b) {
  std::set<std::string> out;
  for (const auto* side : {&a, &b})
    for (const auto& [key, value] : *side) {
      if (run_location_keys().count(key) != 0) continue;
      const FlatConfig& other = side == &a ? b : a;
      const auto it = other.find(key);
      if (it == other.end() || !(it->second == value)) out.insert(key);
    }
  return out;
}

}  // namespace tp
