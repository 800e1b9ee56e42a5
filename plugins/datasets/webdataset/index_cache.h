// The shard index cache (`cache = true`): the dataset's prepare entry (ABI 1.5) indexes every
// shard once per node on local rank 0 and writes its index here; every rank's create then reads
// it instead of walking the headers of a thousand shards again. Per shard, create does one stat
// and reads one small file (about 30 bytes per sample).
//
// One file per shard, not one per dataset: a shard's index is valid exactly while that shard is
// unchanged (its size and modification time in ns are in the file), so rewriting one shard costs
// re-indexing that shard only; a pattern shared by two configs (or train and val patterns that
// overlap) shares the files; and prepare can write each file as soon as its shard is done, so an
// interrupted prepare keeps what it finished. The name is a hash of the shard's absolute path;
// the file holds the path too, so a collision only costs a re-index.
//
// Trust: a cache file is input, not state. Whoever can write it chooses which byte ranges the
// dataset reads and how it groups them into samples, so a read checks everything a scan of the
// shard guarantees (offsets on 512-byte header boundaries, strictly increasing, inside the file;
// keys and extensions as split_member_name makes them; a count no larger than the file can hold)
// and ignores a file that fails, as it ignores a stale one. The default directory is per user and
// refused when others may write it (cache_dir.h); docs/hardening.md, section 11.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tar_index.h"

namespace tp::webdataset {

/// The cache file of the shard `shard_path` in `cache_dir` (a directory, not empty):
/// `<cache_dir>/webdataset-<hash of the shard's absolute path>.index`.
std::string index_cache_path(const std::string& cache_dir, const std::string& shard_path);

/// The cached index of `shard_path`, or nothing when the cache file is absent, unreadable,
/// larger than a scan could write, written for another shard, stale (the shard's `file_size` or
/// `mtime_ns`, as the caller just read them, differ from those it was indexed at), or fails the
/// checks of parse_index_cache.
std::optional<ShardIndex> read_index_cache(const std::string& cache_path, const std::string& shard_path,
                                           uint64_t file_size, int64_t mtime_ns);

/// The index a cache file's text holds, or nothing unless it is a complete index written for
/// `shard_path` at `file_size` and `mtime_ns` that a scan could have produced: a sample count no
/// larger than file_size / 512 (every sample has a 512-byte header), offsets multiples of 512,
/// strictly increasing and at least one header before the end; every sample with a key
/// (non-empty, no '.' in its basename) and 1 or more distinct, non-empty, lower-case extensions
/// without '/'; a sample with the key of the one before it starts with an extension that one
/// has (else the scan would have merged them); nothing after the last sample. Never throws on
/// content (the fuzz target tests/fuzz/shard_index_fuzzer.cpp).
std::optional<ShardIndex> parse_index_cache(const std::string& text, const std::string& shard_path,
                                            uint64_t file_size, int64_t mtime_ns);

/// The text of `index` (a scan of `shard_path`) as a cache file holds it; parse_index_cache of
/// it with the same shard, size and time gives `index` back.
std::string format_index_cache(const std::string& shard_path, const ShardIndex& index);

/// Writes `index` to `cache_path` atomically: a temporary file renamed into place, so a reader
/// never sees half an index. Creates the directory when missing. Throws tp::cpp::Failure
/// (TP_ERR_IO) naming the file when it cannot be written.
void write_index_cache(const std::string& cache_path, const std::string& shard_path, const ShardIndex& index);

}  // namespace tp::webdataset
