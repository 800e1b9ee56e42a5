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
// All or nothing (docs/hardening.md, section 15). The shards are written into a partial
// directory the writer creates beside them, `<out_dir>/.<prefix>.<12 random characters>.
// partial-<pid>`: made with mkdir (which never follows a link and fails on any existing name),
// mode 0700, so no one else can place or replace anything in it, and each shard in it is created
// with O_CREAT | O_EXCL | O_NOFOLLOW. Only finish() moves them into `out_dir`, in order, each
// with a rename that never replaces an existing name (a file or a symbolic link planted there
// meanwhile is refused, never written through), then the set's description file last: until
// then `out_dir` holds no shard of this write, and whatever stops the writer (an error, a full
// disk, a signal the caller turns into an exception) removes the partial directory with the
// destructor. A writer killed outright (SIGKILL, power loss) leaves its partial directory, which
// the next writer of the same prefix in that directory removes once its pid is gone (the suffix
// `.partial-<pid>` is also the one the framework's sweep of stale temporaries knows).
//
// Example:
//   tp::webdataset::ShardWriter writer("out", "train", 1 << 30);
//   writer.add("000000", {{"jpg", jpeg_bytes}, {"cls", "3"}});
//   const tp::webdataset::WrittenShards written = writer.finish();  // written.pattern: out/train-{000000..000012}.tar
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sample_limits.h"

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
  /// Shards go to `out_dir` (created when missing) as `<prefix>-NNNNNN.tar`, through the partial
  /// directory (above), which the constructor creates after removing the stale ones of this
  /// prefix (their pid gone, owned by this user). A new shard starts when the next sample would
  /// make the current one larger than `max_shard_bytes` (> 0); a sample is never split, so a
  /// single sample larger than that gets a shard of its own. Throws
  /// tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT) when max_shard_bytes is 0 or prefix is empty,
  /// holds a '/' or is "." or "..", (TP_ERR_IO) naming the directory when it or the partial
  /// directory cannot be created.
  ShardWriter(std::string out_dir, std::string prefix, uint64_t max_shard_bytes);
  /// Unless finish() completed: removes the partial directory with every shard in it.
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  /// Appends a sample: one member `<key>.<extension>` per entry, in the order given. Throws
  /// tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT) when the reader would not give the sample back
  /// as written: `key` empty, absolute, with a '..' component, or a '.' in its last component;
  /// no member, an extension empty, with a '/', or repeated (case-insensitively); `key` equal
  /// to the previous sample's (the two would merge); more than kMaxSampleBytes in the shard
  /// (sample_tar_bytes). Throws Failure(TP_ERR_IO) naming the shard when it cannot be written.
  void add(const std::string& key, const std::vector<ShardMember>& members);

  /// Closes the last shard, moves every shard into `out_dir` (in order, never replacing an
  /// existing name), then, when `description_name` is not empty, the file of that name in
  /// `out_dir` holding what `describe` returns for the written set (moved last: a set that has
  /// it is complete), and removes the partial directory. Call once. Throws Failure(TP_ERR_IO)
  /// naming the shard or the name when it cannot be completed or a name in `out_dir` is taken
  /// (by a file or link placed there during the write): the shards it had moved are removed
  /// again, so `out_dir` holds none of this write.
  WrittenShards finish(const std::string& description_name = "",
                       const std::function<std::string(const WrittenShards&)>& describe = {});

  /// The partial directory the shards are written into until finish().
  const std::string& partial_dir() const { return partial_dir_; }
  /// Shards completed so far (closed, in the partial directory until finish()).
  std::size_t completed_shards() const { return names_.size(); }
  /// The stale partial directories (of processes that are gone) the constructor removed.
  const std::vector<std::string>& swept() const { return swept_; }

 private:
  void open_shard();
  void close_shard();
  void remove_partial();

  std::string out_dir_;
  std::string prefix_;
  uint64_t max_shard_bytes_;
  std::string partial_dir_;
  std::vector<std::string> swept_;
  std::unique_ptr<struct archive, int (*)(struct archive*)> archive_;
  int fd_ = -1;                  // the shard being written
  std::string current_;          // its name
  uint64_t samples_in_shard_ = 0;
  std::string last_key_;
  bool finished_ = false;
  std::vector<std::string> names_;  // the shards completed, by file name
  WrittenShards written_;
};

/// Bytes a sample takes in a shard: per member a 512-byte header, its data padded to 512, and
/// (a name beyond ustar's 100 bytes or not ASCII) room for a pax extended header. An upper bound:
/// the exact count is what libarchive writes.
uint64_t sample_tar_bytes(const std::string& key, const std::vector<ShardMember>& members);

}  // namespace tp::webdataset
