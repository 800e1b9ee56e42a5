#include "tp/framework/config/config_changes.h"

#include <charconv>
#include <map>
#include <sstream>
#include <string_view>

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

// Every key whose value differs, in key order, with its line; `changed` holds the keys set on
// both sides to different values.
struct Differences {
  std::map<std::string, std::string> lines;
  std::vector<std::string> changed;
};

Differences differences(const std::string& before, const std::string& now) {
  std::map<std::string, std::string> old_values, new_values;
  Differences out;
  try {
    flatten(parse_toml(before), "", old_values);
    flatten(parse_toml(now), "", new_values);
  } catch (const toml::parse_error& e) {
    out.lines[""] = "the configurations could not be compared (" + std::string(e.description()) + ")";
    return out;
  }
  for (const auto& [key, value] : new_values) {
    const auto old = old_values.find(key);
    if (old == old_values.end()) {
      out.lines[key] = key + ": " + value + " (new)";
    } else if (old->second != value) {
      out.lines[key] = key + ": " + old->second + " -> " + value;
      out.changed.push_back(key);
    }
  }
  for (const auto& [key, value] : old_values)
    if (!new_values.contains(key)) out.lines[key] = key + ": removed (was " + value + ")";
  return out;
}

// The optimizer's options come back with its state (torch::optim's load restores each group's
// lr, weight_decay, betas, momentum, ...) and the schedule continues from its saved lrs and step:
// a change to either would be recorded in config.toml and not used. optim.implementation only
// picks the kernels for the same state (fused and loop checkpoints move freely).
bool restored_by_checkpoint(const std::string& key) {
  const auto under = [&](std::string_view section) { return key.starts_with(section); };
  return (under("optim.") && key != "optim.implementation") || under("schedule.");
}

}  // namespace

std::vector<std::string> config_changes(const std::string& before, const std::string& now) {
  Differences found = differences(before, now);
  std::vector<std::string> lines;
  lines.reserve(found.lines.size());
  for (auto& [key, line] : found.lines) lines.push_back(std::move(line));
  return lines;
}

std::vector<std::string> changes_a_resume_ignores(const std::string& before, const std::string& now) {
  Differences found = differences(before, now);
  std::vector<std::string> lines;
  for (const std::string& key : found.changed)
    if (restored_by_checkpoint(key)) lines.push_back(std::move(found.lines[key]));
  return lines;
}

std::vector<std::string> changes_a_mid_epoch_resume_refuses(const std::string& before, const std::string& now) {
  Differences found = differences(before, now);
  std::vector<std::string> lines;
  for (const std::string& key : found.changed)
    if (key == "train.batch_size") lines.push_back(std::move(found.lines[key]));
  return lines;
}

}  // namespace tp
