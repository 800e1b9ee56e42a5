// The command-line config of the oracle drivers (coco_driver, webdataset_driver): each
// `key=type:value` argument becomes one value of a FakeConfig, so the Python side of an oracle
// configures the plugin as a run's table would. Types: i (int), f (float), b (bool 0/1),
// s (string), sa / ia / fa (comma-separated strings, ints, floats; an empty value is an empty array).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/fake_host.h"

namespace tp::test {

/// The comma-separated items of `s`; none for "".
inline std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t comma = s.find(',', at);
    out.push_back(s.substr(at, comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

/// Sets the value one `key=type:value` argument names. Throws std::invalid_argument naming the
/// argument when it has no `=` or `:`, or an unknown type (and what std::stoll / std::stod throw).
inline void set_config_arg(FakeConfig& cfg, const std::string& arg) {
  const std::size_t eq = arg.find('='), colon = arg.find(':', eq);
  if (eq == std::string::npos || colon == std::string::npos) throw std::invalid_argument("bad argument '" + arg + "'");
  const std::string key = arg.substr(0, eq), type = arg.substr(eq + 1, colon - eq - 1), value = arg.substr(colon + 1);
  if (type == "i") cfg.values[key] = int64_t{std::stoll(value)};
  else if (type == "f") cfg.values[key] = std::stod(value);
  else if (type == "b") cfg.values[key] = value == "1";
  else if (type == "s") cfg.values[key] = value;
  else if (type == "sa") cfg.values[key] = split_commas(value);
  else if (type == "ia") {
    std::vector<int64_t> v;
    for (const std::string& x : split_commas(value)) v.push_back(std::stoll(x));
    cfg.values[key] = v;
  } else if (type == "fa") {
    std::vector<double> v;
    for (const std::string& x : split_commas(value)) v.push_back(std::stod(x));
    cfg.values[key] = v;
  } else {
    throw std::invalid_argument("unknown type in '" + arg + "'");
  }
}

}  // namespace tp::test
