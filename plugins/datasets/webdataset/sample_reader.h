// Reading one sample of a shard in get_sample: pread its byte range (tar_index.h) from a shard
// file kept open, then parse that range with libarchive from memory and take its members. No
// seek position is shared, so the loader's worker threads read concurrently from one descriptor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sample_limits.h"

namespace tp::webdataset {

/// How many shard files one dataset instance keeps open. A rank reads a few shards at a time
/// (the sampler's group window), so 64 means no open() per sample while staying far below the
/// process's descriptor limit with train and val open together.
inline constexpr std::size_t kMaxOpenShards = 64;

struct SampleSource;

/// The shard files of one dataset instance, opened on first use and kept in a bounded
/// least-recently-used set. Thread-safe: [worker] calls of read() run concurrently; a mutex
/// guards only the set itself, never an open() or a read.
class ShardFiles {
 public:
  /// `paths` are the shards, by index; `max_open` >= 1 bounds the descriptors kept.
  explicit ShardFiles(std::vector<std::string> paths, std::size_t max_open = kMaxOpenShards);
  ShardFiles(const ShardFiles&) = delete;
  ShardFiles& operator=(const ShardFiles&) = delete;

  /// The bytes [begin, end) of shard `shard` (one pread loop). On a shard's first open it asks
  /// the kernel to read the file ahead (POSIX_FADV_SEQUENTIAL on every open, POSIX_FADV_WILLNEED
  /// on the first), since a rank reads a shard's samples close together. Throws
  /// tp::cpp::Failure(TP_ERR_IO) naming the shard when it cannot be opened or read, or ends
  /// before `end` (it changed since it was indexed).
  std::vector<unsigned char> read(std::size_t shard, uint64_t begin, uint64_t end) const;

  /// The bytes of the sample at `source.offset` of shard `shard`, whose index bounds it at `end`:
  /// the next sample's first header or, for a shard's last sample (`to_file_end`), the file's
  /// end. A last sample ends where the archive does: its member headers are walked from its
  /// first (data skipped, not read) up to the end-of-archive blocks or the end of the file, so
  /// whatever follows the archive (a sparse tail, padding, appended bytes) is never read. Throws
  /// tp::cpp::Failure(TP_ERR_IO) naming the shard, the key and the offset when the sample would
  /// take more than kMaxSampleBytes, a header cannot be read, a member runs past the file's end,
  /// and as read().
  std::vector<unsigned char> read_sample(std::size_t shard, const SampleSource& source, uint64_t end,
                                         bool to_file_end) const;

  /// How many descriptors are open now (tests).
  std::size_t open_count() const;

 private:
  /// A descriptor, closed when the last reader holding it is done (an evicted file may still be
  /// in a read on another thread).
  struct OpenShard {
    int fd = -1;
    ~OpenShard();
  };
  std::shared_ptr<const OpenShard> acquire(std::size_t shard) const;

  std::vector<std::string> paths_;
  std::size_t max_open_;
  mutable std::mutex mutex_;
  mutable std::list<std::size_t> recent_;  // shard indices, most recently used first
  struct Slot {
    std::shared_ptr<const OpenShard> file;
    std::list<std::size_t>::iterator in_recent;
  };
  mutable std::unordered_map<std::size_t, Slot> open_;
  mutable std::vector<bool> advised_;  // WILLNEED already asked for this shard
};

/// Where a sample's bytes came from, for messages: "shard '<path>', sample '<key>' at byte N".
struct SampleSource {
  const std::string& shard;
  const std::string& key;
  uint64_t offset;
  std::string describe() const;
};

/// The data of the members of one sample whose extensions are `wanted`, in that order (nothing
/// for one the region lacks), from `region`, the sample's bytes. Every entry of the region is
/// checked: a regular member's key must be `source.key` (else the shard changed since it was
/// indexed). Throws tp::cpp::Failure(TP_ERR_IO) naming the shard, the key and the offset when
/// libarchive cannot parse the region or reports it truncated, a member's path is absolute or
/// has a `..` component, or a key differs.
std::vector<std::optional<std::vector<unsigned char>>> read_sample_members(const std::vector<unsigned char>& region,
                                                                           const std::vector<std::string>& wanted,
                                                                           const SampleSource& source);

}  // namespace tp::webdataset
