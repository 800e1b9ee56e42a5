#include "tp/framework/config/config_changes.h"

#include <charconv>
#include <map>
#include <sstream>

#include <toml++/toml.h>

#include "tp/framework/config/secrets.h"
#include "tp/framework/config/toml_text.h"

namespace tp {
namespace {

// `node` as a short TOML literal: floats in the shortest text that reads back (0.4, not
// 0.40000000000000002), arrays without toml++'s padding.
std::string value_text(const toml::node& node) {
  if (const auto* number = node.as_floating_point()) {
    char buffer[32];
    const auto written = std::to_chars(buffer, buffer + sizeof buffer, number->get());
    return std::string(buffer, written.ptr);
  }
  if (const auto* array = node.as_array()) {
    std::string text = "[";
    for (std::size_t i = 0; i < array->size(); ++i) text += (i == 0 ? "" : ", ") + value_text(*array->get(i));
    return text + "]";
  }
  std::ostringstream text;
  text << toml::toml_formatter(node, toml::format_flags::none);
  return text.str();
}

// Every leaf of `table` as "dotted.key" -> its TOML text.
void flatten(const toml::table& table, const std::string& prefix, std::map<std::string, std::string>& out) {
  for (const auto& [key, node] : table) {
    const std::string path = prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const toml::table* inner = node.as_table()) {
      flatten(*inner, path, out);
      continue;
    }
    // An array of tables ([[metrics]]) by element: metrics[1].component, not both arrays whole.
    const toml::array* array = node.as_array();
    if (array != nullptr && !array->empty() && array->is_array_of_tables()) {
      for (std::size_t i = 0; i < array->size(); ++i)
        flatten(*array->get(i)->as_table(), path + "[" + std::to_string(i) + "]", out);
      continue;
    }
    // A checkpoint written before the resolved config was redacted may still hold a password.
    out[path] = redact_uri_credentials(value_text(node));
  }
}

}  // namespace

std::vector<std::string> config_changes(const std::string& before, const std::string& now) {
  std::map<std::string, std::string> old_values, new_values;
  try {
    flatten(parse_toml(before), "", old_values);
    flatten(parse_toml(now), "", new_values);
  } catch (const toml::parse_error& e) {
    return {"the configurations could not be compared (" + std::string(e.description()) + ")"};
  }
  std::map<std::string, std::string> by_key;  // key order over both sides
  for (const auto& [key, value] : new_values) {
    const auto old = old_values.find(key);
    if (old == old_values.end()) by_key[key] = key + ": " + value + " (new)";
    else if (old->second != value) by_key[key] = key + ": " + old->second + " -> " + value;
  }
  for (const auto& [key, value] : old_values)
    if (!new_values.contains(key)) by_key[key] = key + ": removed (was " + value + ")";
  std::vector<std::string> lines;
  lines.reserve(by_key.size());
  for (auto& [key, line] : by_key) lines.push_back(std::move(line));
  return lines;
}

}  // namespace tp
