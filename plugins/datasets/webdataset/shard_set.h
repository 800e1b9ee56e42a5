// The samples of one split: its shard pattern expanded, every shard indexed (from the index
// cache when it is valid, else by a pass over its headers) and kept compactly for get_sample:
// about 20 bytes plus the key per sample (a million samples: about 30 MB), no string per
// extension. Samples are numbered shard by shard in pattern order, members in tar order, so
// index order is key order within a shard and each shard is one contiguous group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tar_index.h"

namespace tp::webdataset {

/// Whether and where the shard index cache is read and written.
struct IndexCacheUse {
  bool read = false;      ///< take a valid cache file instead of indexing the shard
  bool write = false;     ///< write the index of every shard indexed (prepare only: one writer per node)
  std::string directory;  ///< where the cache files are (resolved: never "" when read or write)
};

/// What loading a split did, for its log line.
struct ShardSetStats {
  std::size_t shards = 0;      ///< names the pattern expanded to
  std::size_t empty = 0;       ///< of them, shards without a sample
  std::size_t from_cache = 0;  ///< indexes read from the cache
  std::size_t indexed = 0;     ///< shards whose headers were read now
};

/// The samples of a split's non-empty shards. Immutable once loaded; every accessor is [any].
class ShardSet {
 public:
  /// Where sample `index` is.
  struct Location {
    std::size_t shard = 0;  ///< index into shard_paths()
    uint64_t begin = 0;     ///< its byte range in the shard: [begin, end)
    uint64_t end = 0;
    bool to_file_end = false;  ///< the shard's last sample: `end` is the file's end, the archive's is found on reading
    std::string key;
    uint32_t members = 0;   ///< its extensions: extension_sets()[members]
  };

  /// Appends a shard's samples (a shard with none is left out, so the group ends stay strictly
  /// increasing).
  void add_shard(const std::string& path, const ShardIndex& index);

  uint64_t size() const { return offsets_.size(); }
  /// Each shard's end index (cumulative sample counts): sample_groups() of the dataset.
  const std::vector<uint64_t>& group_ends() const { return ends_; }
  const std::vector<std::string>& shard_paths() const { return paths_; }
  /// The distinct extension lists of the samples, each in tar order.
  const std::vector<std::vector<std::string>>& extension_sets() const { return sets_; }
  /// Where sample `index` < size() is. Cost: a binary search over the shards.
  Location locate(uint64_t index) const;

 private:
  std::vector<std::string> paths_;
  std::vector<uint64_t> file_sizes_;
  std::vector<uint64_t> ends_;
  std::vector<uint64_t> offsets_;   // per sample: its first header's offset in its shard
  std::string keys_;                // every key, concatenated
  std::vector<uint64_t> key_ends_;  // per sample: where its key ends in keys_
  std::vector<uint32_t> set_of_;    // per sample: its extension set
  std::vector<std::vector<std::string>> sets_;
  std::map<std::vector<std::string>, uint32_t> set_ids_;
};

/// The samples of the shards `pattern` (config key `key`) names, each indexed or read from the
/// cache as `cache` says (and written to it when cache.write). Throws tp::cpp::Failure naming the
/// key, the pattern and the shard: TP_ERR_CONFIG when the pattern is malformed or names more than
/// kMaxShards shards; TP_ERR_IO when a shard is missing or unreadable, is not a tar, is truncated
/// or damaged (tar_index.h), or when every shard is empty.
ShardSet load_shard_set(const std::string& pattern, const char* key, const IndexCacheUse& cache,
                        ShardSetStats* stats);

}  // namespace tp::webdataset
