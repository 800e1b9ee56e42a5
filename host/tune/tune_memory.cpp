#include "tune/tune_memory.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "tp/framework/error.h"

namespace tp::cli {

double parse_memory_size(const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0; // no number at all
  }
  std::string unit;
  for (const char c : text.substr(used))
    if (c != ' ') unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  constexpr double kKi = 1024.0, kMi = kKi * 1024, kGi = kMi * 1024, kTi = kGi * 1024;
  const std::vector<std::pair<std::string, double>> units{
      {"", 1},      {"b", 1},       {"k", kKi},  {"kib", kKi}, {"kb", 1e3},  {"m", kMi},   {"mib", kMi},
      {"mb", 1e6},  {"g", kGi},     {"gib", kGi}, {"gb", 1e9},  {"t", kTi},   {"tib", kTi}, {"tb", 1e12}};
  for (const auto& [name, scale] : units)
    if (used > 0 && unit == name && value > 0 && std::isfinite(value)) return value * scale;
  throw ConfigError("--memory-limit", "--memory-limit '" + text + "' is not a memory size: give a positive number "
                                      "with a unit, e.g. 4GiB, 512MiB or 8GB (KiB/MiB/GiB binary, KB/MB/GB decimal).");
}

double high_water_mb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) * 1024.0 / 1e6; // kB
  return std::nan("");
}

bool says_out_of_memory(const std::filesystem::path& output) {
  std::ifstream in(output);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* sign : {"out of memory", "outofmemory", "not enough memory", "bad_alloc", "cannot allocate memory"})
    if (text.find(sign) != std::string::npos) return true;
  return false;
}

}  // namespace tp::cli
