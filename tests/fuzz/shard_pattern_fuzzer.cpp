// Fuzz target: webdataset's shard patterns (brace expansion, shard_pattern.h), which a config's
// `shards` key or `--set` gives. Every input must expand to at most kMaxShards non-empty names or
// be refused with tp::cpp::Failure; any other exception, a crash, a sanitizer report (a stack
// overflow from nesting: ~16,000 nested braces was one, issue 58) or a hang is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "shard_pattern.h"
#include "tp/cpp/guard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string pattern(reinterpret_cast<const char*>(data), size);
  try {
    const std::vector<std::string> names = tp::webdataset::expand_shard_pattern(pattern, "shards");
    if (names.size() > tp::webdataset::kMaxShards) __builtin_trap();
    for (const std::string& name : names)
      if (name.empty()) __builtin_trap();
  } catch (const tp::cpp::Failure&) {
    // The expected way to refuse a pattern.
  }
  return 0;
}
