// Writing WebDataset shards: samples (a key and its members' bytes by extension) into POSIX tar
// files `<prefix>-000000.tar`, `<prefix>-000001.tar`, ... of at most about max_shard_bytes each,
// which the Python `webdataset` package and this plugin read. Torch-free; `host shards write`
// uses it, tests write their fixtures with it.
//
// The tar format is libarchive's "pax restricted": plain ustar headers, with a pax extended
// header only for what ustar cannot hold (a name longer than 100 bytes or not ASCII), which is
// what Python's tarfile (webdataset's reader) reads. Every member is a regular file of mode
// 0644, owner 0:0 without names, modification time kFixedMtime: the same samples in the same
// order give byte-identical shards, so a shard's checksum says whether its data changed.
//
// Example:
//   tp::webdataset::ShardWriter writer("out", "train", 1 << 30);
//   writer.add("000000", {{"jpg", jpeg_bytes}, {"cls", "3"}});
//   const tp::webdataset::ShardSet written = writer.finish();  // written.pattern: out/train-{000000..000012}.tar
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct archive;

namespace tp::webdataset {

/// Every member's modification time (2000-01-01T00:00:00Z): fixed so that shards are
/// reproducible, and after 1970 so that no tool shows a negative or zero date.
inline constexpr int64_t kFixedMtime = 946684800;

/// One member of a sample: written as `<key>.<extension>`. Borrows its bytes for the add() call.
struct ShardMember {
  ShardMember(std::string extension_, std::string_view data_) : extension(std::move(extension_)), data(data_) {}
  ShardMember(std::string extension_, const std::vector<unsigned char>& data_)
      : extension(std::move(extension_)),
        data(reinterpret_cast<const char*>(data_.data()), data_.size()) {}
  std::string extension;  ///< "jpg", "cls", "seg.png": no '/', not empty
  std::string_view data;  ///< the member's bytes
};

/// What finish() wrote.
struct WrittenShards {
  std::vector<std::string> paths;  ///< every shard, in order
  /// The shard pattern naming them all (`<out_dir>/<prefix>-{000000..000012}.tar`; one shard:
  /// its path), as the plugin's `shards` key takes it; "" when no sample was added.
  std::string pattern;
  uint64_t samples = 0;
};

/// Writes samples into consecutive shards. Not thread-safe; one writer per prefix and directory.
class ShardWriter {
 public:
  /// Shards go to `out_dir` (created when missing) as `<prefix>-NNNNNN.tar`. A new shard starts
  /// when the next sample would make the current one larger than `max_shard_bytes` (> 0); a
  /// sample is never split, so a single sample larger than that gets a shard of its own.
  /// Throws tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT) when max_shard_bytes is 0 or prefix is
  /// empty or holds a '/', (TP_ERR_IO) naming the directory when it cannot be created.
  ShardWriter(std::string out_dir, std::string prefix, uint64_t max_shard_bytes);
  /// Removes the shard being written (its temporary file) unless finish() was called.
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  /// Appends a sample: one member `<key>.<extension>` per entry, in the order given. Throws
  /// tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT) when the reader would not give the sample back
  /// as written: `key` empty, absolute, with a '..' component, or a '.' in its last component;
  /// no member, an extension empty, with a '/', or repeated (case-insensitively); `key` equal
  /// to the previous sample's (the two would merge). Throws Failure(TP_ERR_IO) naming the shard
  /// when it cannot be written.
  void add(const std::string& key, const std::vector<ShardMember>& members);

  /// Closes the last shard, moves it into place and returns every shard written. Call once;
  /// throws Failure(TP_ERR_IO) naming the shard when it cannot be completed.
  WrittenShards finish();

 private:
  void open_shard();
  void close_shard();

  std::string out_dir_;
  std::string prefix_;
  uint64_t max_shard_bytes_;
  std::unique_ptr<struct archive, int (*)(struct archive*)> archive_;
  std::string temporary_;       // the shard being written, before its rename
  std::string final_path_;
  uint64_t samples_in_shard_ = 0;
  std::string last_key_;
  bool finished_ = false;
  WrittenShards written_;
};

/// Bytes a sample takes in a shard: per member a 512-byte header, its data padded to 512, and
/// (a name beyond ustar's 100 bytes or not ASCII) room for a pax extended header. An upper bound:
/// the exact count is what libarchive writes.
uint64_t sample_tar_bytes(const std::string& key, const std::vector<ShardMember>& members);

}  // namespace tp::webdataset
