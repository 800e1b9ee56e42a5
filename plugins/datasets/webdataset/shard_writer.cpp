#include "shard_writer.h"

#include <archive.h>
#include <archive_entry.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "tp/cpp/guard.h"

namespace tp::webdataset {
namespace {

namespace fs = std::filesystem;
using tp::cpp::Failure;
constexpr uint64_t kBlock = 512;
constexpr uint64_t kEndOfArchive = 2 * kBlock;  // two zero blocks close a tar

uint64_t padded(uint64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

std::string lowered(const std::string& text) {
  std::string out = text;
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

[[noreturn]] void refuse(const std::string& key, const std::string& why) {
  throw Failure(TP_ERR_INVALID_ARGUMENT, "shard writer: sample '" + key + "' " + why);
}

/// Throws (refuse) when the reader would not give `key`'s sample back as written.
void check_sample(const std::string& key, const std::string& previous, const std::vector<ShardMember>& members) {
  if (key.empty()) refuse(key, "has an empty key");
  if (key[0] == '/') refuse(key, "has an absolute key; keys are relative paths");
  std::size_t from = 0;
  for (;;) {
    const std::size_t slash = key.find('/', from);
    const std::string part = key.substr(from, slash == std::string::npos ? std::string::npos : slash - from);
    if (part == "..") refuse(key, "has a '..' component; the reader refuses such members");
    if (slash == std::string::npos) {
      if (part.empty() || part.find('.') != std::string::npos)
        refuse(key, "ends in an empty name or one with a '.': a key is the member name up to the first '.' of its "
                    "last component");
      break;
    }
    from = slash + 1;
  }
  if (key == previous)
    refuse(key, "repeats the previous sample's key: consecutive members with one key are one sample");
  if (members.empty()) refuse(key, "has no member");
  for (std::size_t i = 0; i < members.size(); ++i) {
    const std::string& ext = members[i].extension;
    if (ext.empty() || ext.find('/') != std::string::npos || ext.find('\0') != std::string::npos)
      refuse(key, "has a member extension '" + ext + "': not empty, no '/'");
    for (std::size_t j = 0; j < i; ++j)
      if (lowered(members[j].extension) == lowered(ext))
        refuse(key, "has the extension '" + ext + "' twice (extensions are compared in lower case)");
  }
}

}  // namespace

uint64_t sample_tar_bytes(const std::string& key, const std::vector<ShardMember>& members) {
  uint64_t total = 0;
  for (const ShardMember& member : members) {
    const std::string name = key + "." + member.extension;
    bool ascii = true;
    for (unsigned char c : name) ascii = ascii && c < 0x80;
    total += kBlock + padded(member.data.size());
    // A pax extended header: its own header block and records ("<len> path=<name>\n", maybe
    // another for the UTF-8 form), padded.
    if (name.size() > 100 || !ascii) total += kBlock + padded(2 * (name.size() + 32));
  }
  return total;
}

ShardWriter::ShardWriter(std::string out_dir, std::string prefix, uint64_t max_shard_bytes)
    : out_dir_(std::move(out_dir)),
      prefix_(std::move(prefix)),
      max_shard_bytes_(max_shard_bytes),
      archive_(nullptr, &archive_write_free) {
  if (max_shard_bytes_ == 0) throw Failure(TP_ERR_INVALID_ARGUMENT, "shard writer: max_shard_bytes must be > 0");
  if (prefix_.empty() || prefix_.find('/') != std::string::npos)
    throw Failure(TP_ERR_INVALID_ARGUMENT, "shard writer: the prefix '" + prefix_ +
                                               "' must be a non-empty file name (the directory is out_dir)");
  std::error_code ec;
  fs::create_directories(out_dir_, ec);
  if (ec || !fs::is_directory(out_dir_))
    throw Failure(TP_ERR_IO, "shard writer: cannot create the directory '" + out_dir_ + "' (" + ec.message() + ")");
}

ShardWriter::~ShardWriter() {
  if (archive_) {
    archive_.reset();  // closes the file
    std::error_code ec;
    fs::remove(temporary_, ec);
  }
}

void ShardWriter::open_shard() {
  char name[32];
  std::snprintf(name, sizeof name, "-%06zu.tar", written_.paths.size());
  final_path_ = (fs::path(out_dir_) / (prefix_ + name)).string();
  temporary_ = final_path_ + ".tmp." + std::to_string(::getpid());
  archive_.reset(archive_write_new());
  struct archive* a = archive_.get();
  if (a == nullptr) throw Failure(TP_ERR_OUT_OF_MEMORY, "shard writer: libarchive could not allocate a writer");
  // No padding of the last block to libarchive's 10 KiB records: the file ends right after the
  // end-of-archive blocks, so its size is what sample_tar_bytes counts (tarfile reads either).
  if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK || archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
      archive_write_open_filename(a, temporary_.c_str()) != ARCHIVE_OK) {
    const std::string why = archive_error_string(a) != nullptr ? archive_error_string(a) : std::strerror(errno);
    archive_.reset();
    throw Failure(TP_ERR_IO, "shard writer: cannot create the shard '" + temporary_ + "': " + why);
  }
  samples_in_shard_ = 0;
}

void ShardWriter::close_shard() {
  struct archive* a = archive_.get();
  const bool closed = archive_write_close(a) == ARCHIVE_OK;
  const std::string why = archive_error_string(a) != nullptr ? archive_error_string(a) : "";
  archive_.reset();
  if (!closed || std::rename(temporary_.c_str(), final_path_.c_str()) != 0) {
    const std::string reason = !why.empty() ? why : std::strerror(errno);
    std::error_code ec;
    fs::remove(temporary_, ec);
    throw Failure(TP_ERR_IO, "shard writer: cannot complete the shard '" + final_path_ + "': " + reason);
  }
  written_.paths.push_back(final_path_);
}

void ShardWriter::add(const std::string& key, const std::vector<ShardMember>& members) {
  if (finished_) throw Failure(TP_ERR_INVALID_ARGUMENT, "shard writer: add() after finish()");
  check_sample(key, last_key_, members);
  // The current shard's size so far is exact (libarchive's count of the bytes written, whose
  // last member's padding comes with the next header); the sample's is an upper bound, so no
  // shard passes max_shard_bytes unless one sample alone does.
  if (archive_ && samples_in_shard_ > 0) {
    const uint64_t so_far = padded(static_cast<uint64_t>(archive_filter_bytes(archive_.get(), -1)));
    if (so_far + sample_tar_bytes(key, members) + kEndOfArchive > max_shard_bytes_) close_shard();
  }
  if (!archive_) open_shard();
  struct archive* a = archive_.get();
  std::unique_ptr<struct archive_entry, void (*)(struct archive_entry*)> entry(archive_entry_new(), &archive_entry_free);
  for (const ShardMember& member : members) {
    archive_entry_clear(entry.get());
    archive_entry_copy_pathname(entry.get(), (key + "." + member.extension).c_str());
    archive_entry_set_filetype(entry.get(), AE_IFREG);
    archive_entry_set_perm(entry.get(), 0644);
    archive_entry_set_size(entry.get(), static_cast<la_int64_t>(member.data.size()));
    archive_entry_set_mtime(entry.get(), kFixedMtime, 0);
    archive_entry_set_uid(entry.get(), 0);
    archive_entry_set_gid(entry.get(), 0);
    if (archive_write_header(a, entry.get()) != ARCHIVE_OK ||
        archive_write_data(a, member.data.data(), member.data.size()) != static_cast<la_ssize_t>(member.data.size()))
      throw Failure(TP_ERR_IO, "shard writer: cannot write the member '" + key + "." + member.extension +
                                   "' to the shard '" + temporary_ + "': " +
                                   (archive_error_string(a) != nullptr ? archive_error_string(a) : "no message"));
  }
  ++samples_in_shard_;
  ++written_.samples;
  last_key_ = key;
}

WrittenShards ShardWriter::finish() {
  if (finished_) throw Failure(TP_ERR_INVALID_ARGUMENT, "shard writer: finish() called twice");
  finished_ = true;
  if (archive_) close_shard();
  const std::size_t n = written_.paths.size();
  if (n == 1) {
    written_.pattern = written_.paths.front();
  } else if (n > 1) {
    char range[48];
    std::snprintf(range, sizeof range, "-{000000..%06zu}.tar", n - 1);
    written_.pattern = (fs::path(out_dir_) / (prefix_ + range)).string();
  }
  return std::move(written_);
}

}  // namespace tp::webdataset
