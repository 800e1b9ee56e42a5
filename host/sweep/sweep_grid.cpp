#include "sweep/sweep_grid.h"

#include <cstdint>
#include <cstdio>
#include <map>
#include <set>

#include <toml++/toml.h>

#include "tp/framework/config/flatten.h"
#include "tp/framework/error.h"

namespace tp::cli {
namespace {

constexpr std::size_t kMaxNameLength = 200; // file systems allow 255 bytes; room for suffixes

// One value of an axis: its overrides and its part of the directory name.
struct AxisValue {
  std::vector<std::string> overrides;
  std::string name;
};

[[noreturn]] void bad_grid(const std::string& argument, const std::string& problem) {
  throw ConfigError("--grid", "--grid " + argument + ": " + problem +
                                  " Write --grid KEY=V1,V2,... (TOML values, e.g. --grid amp.precision=fp32,bf16), or "
                                  "--grid KEY1+KEY2=[A1,B1],[A2,B2] to change keys together.");
}

std::string trim(const std::string& text) {
  const std::size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// Splits at the commas outside brackets, braces and quotes: "[1,2],[3,4]" is two values.
std::vector<std::string> split_values(const std::string& text) {
  std::vector<std::string> out;
  std::string current;
  int depth = 0;
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == '\\' && quote == '"' && i + 1 < text.size()) current += text[i++];
      else if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 0) {
      out.push_back(trim(current));
      current.clear();
      continue;
    }
    current += c;
  }
  out.push_back(trim(current));
  return out;
}

std::vector<std::string> split_keys(const std::string& text) {
  std::vector<std::string> keys;
  std::size_t start = 0;
  for (std::size_t plus; (plus = text.find('+', start)) != std::string::npos; start = plus + 1)
    keys.push_back(trim(text.substr(start, plus - start)));
  keys.push_back(trim(text.substr(start)));
  return keys;
}

// A key or value as part of a directory name; ',' and '=' are the name's own separators.
std::string safe(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\'' || c == ' ') continue;
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '_' || c == '-' || c == '+';
    out += keep ? c : '_';
  }
  return out;
}

// FNV-1a: a stable hash (std::hash is not stable across builds), for cut names.
std::string hash_hex(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (const char c : text) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(hash));
  return out;
}

// The elements of a multi-key value "[64, 1]" as --set value texts and as name parts.
std::vector<FlatValue> elements(const std::string& argument, const std::string& text, std::size_t keys) {
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + text);
  } catch (const toml::parse_error&) {
    bad_grid(argument, "'" + text + "' is not a TOML array.");
  }
  const toml::array* array = parsed["v"].as_array();
  if (array == nullptr || array->size() != keys)
    bad_grid(argument, "the value '" + text + "' must be an array of " + std::to_string(keys) +
                           " values, one per key.");
  std::vector<FlatValue> out;
  for (const toml::node& element : *array) {
    if (element.is_table() || element.is_array_of_tables())
      bad_grid(argument, "the value '" + text + "' holds a table; grid values are plain values.");
    toml::table one;
    one.insert("v", element);
    out.push_back(flatten_config(one).at("v"));
  }
  return out;
}

// `text` as the value --set reads it (a TOML value; other text is a string), as a literal: 1e-3
// and 0.001 are one value.
std::string value_literal(const std::string& text) {
  try {
    const toml::table parsed = toml::parse("v = " + text);
    return flatten_config(parsed).at("v").literal;
  } catch (const std::exception&) {
    return "\"" + text + "\"";
  }
}

std::vector<AxisValue> parse_axis(const std::string& argument, std::set<std::string>& seen_keys) {
  const std::size_t equals = argument.find('=');
  if (equals == std::string::npos) bad_grid(argument, "there is no '='.");
  const std::vector<std::string> keys = split_keys(argument.substr(0, equals));
  for (const std::string& key : keys) {
    if (key.empty()) bad_grid(argument, "a key is empty.");
    if (!seen_keys.insert(key).second)
      bad_grid(argument, "the key '" + key + "' is given twice; each key belongs to one axis.");
  }
  std::vector<AxisValue> values;
  std::map<std::string, std::string> written_as;  // a value's literal -> the text that gave it
  for (const std::string& text : split_values(argument.substr(equals + 1))) {
    if (text.empty()) bad_grid(argument, "a value is empty.");
    // Two texts of one value (0.003 twice, 1e-3 and 0.001) would train the same cell twice.
    const auto [same, first] = written_as.emplace(value_literal(text), text);
    if (!first)
      bad_grid(argument, "'" + same->second + "' and '" + text + "' are the same value: their cells would train "
                         "alike. Give each value once.");
    AxisValue value;
    if (keys.size() == 1) {
      // Passed on as written, so it reads exactly as the same --set would.
      value.overrides.push_back(keys[0] + "=" + text);
      value.name = safe(keys[0]) + "=" + safe(text);
    } else {
      const std::vector<FlatValue> parts = elements(argument, text, keys.size());
      for (std::size_t k = 0; k < keys.size(); ++k) {
        value.overrides.push_back(keys[k] + "=" + parts[k].literal);
        value.name += (k ? "," : "") + safe(keys[k]) + "=" + safe(parts[k].display);
      }
    }
    values.push_back(std::move(value));
  }
  return values;
}

}  // namespace

std::vector<SweepCell> expand_grid(const std::vector<std::string>& grid) {
  std::set<std::string> seen_keys;
  std::vector<SweepCell> cells{SweepCell{}};
  for (const std::string& argument : grid) {
    const std::vector<AxisValue> values = parse_axis(argument, seen_keys);
    std::vector<SweepCell> next;
    for (const SweepCell& cell : cells)
      for (const AxisValue& value : values) {
        SweepCell grown = cell;
        grown.name += (grown.name.empty() ? "" : ",") + value.name;
        grown.overrides.insert(grown.overrides.end(), value.overrides.begin(), value.overrides.end());
        next.push_back(std::move(grown));
      }
    cells = std::move(next);
  }
  std::map<std::string, const SweepCell*> names;
  for (SweepCell& cell : cells) {
    if (cell.name.size() > kMaxNameLength) cell.name = cell.name.substr(0, kMaxNameLength - 17) + "-" + hash_hex(cell.name);
    const auto [it, added] = names.emplace(cell.name, &cell);
    if (!added) {
      std::string a, b;
      for (const auto& o : it->second->overrides) a += " --set " + o;
      for (const auto& o : cell.overrides) b += " --set " + o;
      throw ConfigError("--grid", "two cells of the grid get the same directory name '" + cell.name + "' (" + a +
                                      " and" + b + "): their values differ only in characters a directory name "
                                      "cannot hold. Write the values so they differ in letters or digits.");
    }
  }
  return cells;
}

namespace {

// "key=text" as key -> the value's literal.
std::map<std::string, std::string> settings_of(const std::vector<std::string>& overrides) {
  std::map<std::string, std::string> out;
  for (const std::string& o : overrides) {
    const std::size_t equals = o.find('=');
    if (equals == std::string::npos) out[o] = "";
    else out[trim(o.substr(0, equals))] = value_literal(trim(o.substr(equals + 1)));
  }
  return out;
}

}  // namespace

bool same_settings(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  return a.size() == b.size() && settings_of(a) == settings_of(b);
}

}  // namespace tp::cli
