// Fuzz target: webdataset's shard index as untrusted input. The first byte picks what the rest is:
//  - even: the text of an index cache file (index_cache.h), the file that decides which byte
//    ranges of a shard the dataset reads as samples. Every input must give an index or nothing,
//    never an exception; an index must be one a scan could write (samples within the shard's
//    size, on 512-byte header boundaries, strictly increasing; keys and extensions as
//    split_member_name makes them), and written back it must read back the same;
//  - odd: the bytes of a shard, indexed by libarchive from memory (tar_index.h): an index, or a
//    tp::cpp::Failure naming the shard, never another exception; the index as a scan makes it,
//    and its cache file read back equal (the parser accepts everything a scan writes).
// A violation traps, as does a crash or a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>

#include "index_cache.h"
#include "tar_index.h"
#include "tp/cpp/guard.h"

namespace {

constexpr const char* kFuzzShard = "/fuzz/shard.tar";
constexpr uint64_t kFuzzShardSize = 1 << 20;
constexpr int64_t kFuzzShardTime = 1700000000000000000;

// Samples as a scan makes them: tar headers start on 512-byte blocks inside the shard.
void check_samples(const tp::webdataset::ShardIndex& index) {
  for (std::size_t i = 0; i < index.samples.size(); ++i) {
    const auto& sample = index.samples[i];
    if (sample.offset >= index.file_size || sample.offset % 512 != 0) __builtin_trap();
    if (i > 0 && sample.offset <= index.samples[i - 1].offset) __builtin_trap();
    if (sample.key.empty() || sample.extensions.empty()) __builtin_trap();
    for (const std::string& ext : sample.extensions)
      if (ext.empty() || ext.find('/') != std::string::npos) __builtin_trap();
  }
}

// `index` written as a cache file must read back equal: what a scan writes, the cache reads.
void check_round_trip(const tp::webdataset::ShardIndex& index) {
  const std::string text = tp::webdataset::format_index_cache(kFuzzShard, index);
  const auto back = tp::webdataset::parse_index_cache(text, kFuzzShard, index.file_size, index.mtime_ns);
  if (!back || back->samples.size() != index.samples.size()) __builtin_trap();
  for (std::size_t i = 0; i < back->samples.size(); ++i)
    if (back->samples[i].key != index.samples[i].key || back->samples[i].offset != index.samples[i].offset ||
        back->samples[i].extensions != index.samples[i].extensions)
      __builtin_trap();
}

void fuzz_cache(const std::string& text) {
  const auto index = tp::webdataset::parse_index_cache(text, kFuzzShard, kFuzzShardSize, kFuzzShardTime);
  if (!index) return;
  check_samples(*index);
  check_round_trip(*index);
}

void fuzz_tar(const uint8_t* data, size_t size) {
  try {
    const tp::webdataset::ShardIndex index = tp::webdataset::index_shard_bytes(data, size, kFuzzShard);
    check_samples(index);
    check_round_trip(index);
  } catch (const tp::cpp::Failure& e) {
    if (std::string(e.what()).find(kFuzzShard) == std::string::npos) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) fuzz_cache(std::string(reinterpret_cast<const char*>(data + 1), size - 1));
  else fuzz_tar(data + 1, size - 1);
  return 0;
}
