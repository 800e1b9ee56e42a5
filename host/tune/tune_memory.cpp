#include "tune/tune_memory.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "tp/framework/config/value_kinds.h"

namespace tp::cli {

double parse_memory_size(const std::string& text) { return parse_byte_size(text, "--memory-limit"); }

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
