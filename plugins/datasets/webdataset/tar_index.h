// The index of one shard: which samples a webdataset tar holds and where each starts, from one
// sequential pass of libarchive over its headers (the member data is skipped with lseek, never
// read). What a sample is follows the webdataset Python package (tariterators.py):
// - a member's key is its path up to the first '.' of its basename, the directory kept; its
//   extension is the rest, lower-cased: `train/000123.seg.png` is key `train/000123`, extension
//   `seg.png`. A basename without a '.', starting or ending with one, has no key and is skipped
//   (webdataset's base_plus_ext skips the first two; an empty extension names no field);
// - consecutive members with the same key form one sample; a new sample starts when the key
//   changes or an extension repeats within the current sample;
// - members whose basename starts and ends with "__" (webdataset's meta files) and entries that
//   are not regular files (directories, links) are skipped.
// A sample's bytes are [its first member's header offset, the next sample's) and, for a shard's
// last sample, up to the archive's end (its end-of-archive blocks, or the end of the file), which
// sample_reader.h finds by walking that sample's headers: it reads exactly that range.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tp::webdataset {

/// One sample of a shard.
struct IndexedSample {
  std::string key;                      ///< the members' common key (never empty)
  uint64_t offset = 0;                  ///< byte offset of its first member's tar header
  std::vector<std::string> extensions;  ///< its members' extensions in tar order: distinct, lower-case
};

/// The samples of one shard, in tar order, and the file state they were read from.
struct ShardIndex {
  uint64_t file_size = 0;  ///< bytes
  int64_t mtime_ns = 0;    ///< modification time, ns since the epoch (the cache's validity)
  std::vector<IndexedSample> samples;
};

/// Splits a member path into its sample key and extension as described above; false (outputs
/// untouched) when the member has no key. The extension is lower-cased (ASCII).
bool split_member_name(const std::string& path, std::string* key, std::string* extension);

/// Whether `path` is a webdataset meta file (its basename starts and ends with "__").
bool is_meta_member(const std::string& path);

/// Groups members into samples as they come in tar order.
class SampleGrouper {
 public:
  /// A regular member at header offset `offset`; meta files and names without a key are ignored.
  void add(const std::string& path, uint64_t offset);
  /// Whether a sample has begun.
  bool started() const { return !samples_.empty(); }
  /// The samples so far (moved out: call once, at the end).
  std::vector<IndexedSample> take() { return std::move(samples_); }

 private:
  std::vector<IndexedSample> samples_;
};

/// The index of the tar shard at `path`, with its size and modification time. A 0-byte file, or
/// one holding only the end-of-archive blocks, has no samples. Throws tp::cpp::Failure(TP_ERR_IO)
/// naming the file, the byte offset and what to do when it cannot be opened or is not a regular
/// file, is not a tar archive (a compressed one included), has a header libarchive cannot read
/// (damaged or cut), or holds a member whose declared size runs past the end of the file
/// (truncated). Cost: one read per member header; member data is skipped by seeking.
ShardIndex index_shard_file(const std::string& path);

/// The header offset of the shard's first sample, or its file size when it holds none, reading
/// headers only up to that sample (usually one): how a cached index's start is checked, since an
/// index that begins past the first sample would drop the shard's leading samples silently.
/// Throws as index_shard_file.
uint64_t first_sample_offset(const std::string& path);

/// index_shard_file over `size` bytes in memory (mtime_ns 0), for tests and the fuzz target;
/// `name` stands for the file in messages. Throws as index_shard_file.
ShardIndex index_shard_bytes(const void* data, std::size_t size, const std::string& name);

}  // namespace tp::webdataset
