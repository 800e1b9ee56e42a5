#include "shard_set.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "index_cache.h"
#include "shard_pattern.h"
#include "tp/cpp/guard.h"

namespace tp::webdataset {
namespace {

using tp::cpp::Failure;

/// The index of one shard whose size and time `info` holds: from the cache when valid, else by
/// reading its headers (and then written to the cache when asked).
ShardIndex shard_index(const std::string& path, const struct stat& info, const IndexCacheUse& cache,
                       ShardSetStats* stats) {
  const auto size = static_cast<uint64_t>(info.st_size);
  const int64_t mtime_ns = static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
  std::string cache_path;
  if (cache.read || cache.write) cache_path = index_cache_path(cache.directory, path);
  if (cache.read) {
    std::optional<ShardIndex> cached = read_index_cache(cache_path, path, size, mtime_ns);
    // Each sample ends where the next begins, and the reader refuses a member of another key, so
    // only samples before the first one listed could be dropped unseen: an index that does not
    // start at byte 0 is checked against the shard's own first header(s), and else not used.
    const uint64_t claimed_start = !cached ? 0 : cached->samples.empty() ? size : cached->samples.front().offset;
    if (cached && (claimed_start == 0 || first_sample_offset(path) == claimed_start)) {
      ++stats->from_cache;
      return std::move(*cached);
    }
  }
  ShardIndex index = index_shard_file(path);
  ++stats->indexed;
  // Only an index of the file as it was stat'ed is cached: one rewritten meanwhile is indexed
  // again next time rather than cached under the old size and time.
  if (cache.write && index.file_size == size && index.mtime_ns == mtime_ns) write_index_cache(cache_path, path, index);
  return index;
}

}  // namespace

void ShardSet::add_shard(const std::string& path, const ShardIndex& index) {
  if (index.samples.empty()) return;
  paths_.push_back(path);
  file_sizes_.push_back(index.file_size);
  for (const IndexedSample& sample : index.samples) {
    offsets_.push_back(sample.offset);
    keys_ += sample.key;
    key_ends_.push_back(keys_.size());
    const auto inserted = set_ids_.emplace(sample.extensions, static_cast<uint32_t>(sets_.size()));
    if (inserted.second) sets_.push_back(sample.extensions);
    set_of_.push_back(inserted.first->second);
  }
  ends_.push_back(offsets_.size());
}

ShardSet::Location ShardSet::locate(uint64_t index) const {
  Location where;
  where.shard = static_cast<std::size_t>(std::upper_bound(ends_.begin(), ends_.end(), index) - ends_.begin());
  const auto i = static_cast<std::size_t>(index);
  where.begin = offsets_[i];
  // A sample runs to the next one's first header; the shard's last at most to the end of the
  // file (ShardFiles::read_sample ends it at the archive's end).
  where.to_file_end = index + 1 >= ends_[where.shard];
  where.end = where.to_file_end ? file_sizes_[where.shard] : offsets_[i + 1];
  const uint64_t key_begin = i == 0 ? 0 : key_ends_[i - 1];
  where.key = keys_.substr(static_cast<std::size_t>(key_begin), static_cast<std::size_t>(key_ends_[i] - key_begin));
  where.members = set_of_[i];
  return where;
}

ShardSet load_shard_set(const std::string& pattern, const char* key, const IndexCacheUse& cache,
                        ShardSetStats* stats) {
  const std::vector<std::string> paths = expand_shard_pattern(pattern, key);
  stats->shards = paths.size();
  ShardSet set;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    // One stat per shard: what tells a cached index from a stale one, and a missing shard from
    // the pattern's typo, in one call.
    struct stat info {};
    if (::stat(paths[i].c_str(), &info) != 0) {
      const int error = errno;
      throw Failure(TP_ERR_IO, "webdataset: shard " + std::to_string(i + 1) + " of " + std::to_string(paths.size()) +
                                   " of " + key + " = '" + pattern + "', '" + paths[i] +
                                   "', cannot be read: " + std::strerror(error) +
                                   (error == ENOENT ? ". Check the pattern's directory and range against the "
                                                      "shards on disk, or write the missing shard"
                                                    : ". Check the file's permissions"));
    }
    const ShardIndex index = shard_index(paths[i], info, cache, stats);
    if (index.samples.empty()) ++stats->empty;
    set.add_shard(paths[i], index);
  }
  if (set.size() == 0)
    throw Failure(TP_ERR_IO, std::string("webdataset: every shard of ") + key + " = '" + pattern + "' is empty (" +
                                 std::to_string(paths.size()) + (paths.size() == 1 ? " shard, '" : " shards, the first '") +
                                 paths.front() +
                                 "'): none holds a member named <key>.<extension>. Check that the pattern names the "
                                 "shards that were written, and that they were written completely");
  return set;
}

}  // namespace tp::webdataset
