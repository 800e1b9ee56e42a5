// Fuzz target: the config layer. Input = TOML text, optionally followed by NUL-separated
// `--set` strings. Every input must end as a RunConfig or a tp::ConfigError: any other
// exception, a crash, a sanitizer report or a hang is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tp/framework/config/load.h"
#include "tp/framework/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t split = input.find('\0');
  const std::string_view toml_text = input.substr(0, split);
  std::vector<std::string> sets;
  for (std::size_t at = split; at != std::string_view::npos && at < input.size();) {
    const std::size_t next = input.find('\0', at + 1);
    sets.emplace_back(input.substr(at + 1, next == std::string_view::npos ? std::string_view::npos : next - at - 1));
    at = next;
  }
  try {
    (void)tp::load_run_config_from_string(toml_text, "fuzz.toml", sets, {});
  } catch (const tp::ConfigError&) {
    // The expected way to reject input.
  }
  return 0;
}
