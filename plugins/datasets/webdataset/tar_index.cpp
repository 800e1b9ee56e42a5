#include "tar_index.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "tp/cpp/guard.h"

namespace tp::webdataset {
namespace {

using tp::cpp::Failure;
constexpr std::size_t kReadBlock = std::size_t{64} * 1024;  // bytes per read of headers; data is skipped by seeking

/// libarchive's handle, freed however the pass ends.
using ArchivePtr = std::unique_ptr<struct archive, int (*)(struct archive*)>;

ArchivePtr new_tar_reader() {
  ArchivePtr a(archive_read_new(), &archive_read_free);
  if (!a) throw Failure(TP_ERR_OUT_OF_MEMORY, "webdataset: libarchive could not allocate a reader");
  // Plain tar only: webdataset's shards are uncompressed, and a reader with every format and
  // filter enabled would also "index" a zip or an ISO image handed to it by mistake.
  archive_read_support_format_tar(a.get());
  return a;
}

std::string libarchive_says(struct archive* a) {
  const char* text = archive_error_string(a);
  return std::string("libarchive: ") + (text != nullptr ? text : "no message");
}

[[noreturn]] void not_a_tar(struct archive* a, const std::string& name) {
  throw Failure(TP_ERR_IO, "webdataset: shard '" + name + "' is not a tar archive (" + libarchive_says(a) +
                               ", at byte 0). Shards are plain POSIX tar files as webdataset writes them; a "
                               "compressed shard (.tar.gz) must be decompressed first. Fix the shard pattern or "
                               "replace the file");
}

/// Every header, in order: regular members go to the grouper, the rest are stepped over. With
/// `first_only`, stops at the first sample's first member (out->samples then holds it alone).
void index_headers(struct archive* a, const std::string& name, uint64_t file_size, ShardIndex* out,
                   bool first_only = false) {
  SampleGrouper grouper;
  for (;;) {
    struct archive_entry* entry = nullptr;
    const int status = archive_read_next_header(a, &entry);
    const auto at = static_cast<uint64_t>(archive_read_header_position(a));
    if (status == ARCHIVE_EOF) break;
    if (status != ARCHIVE_OK && status != ARCHIVE_WARN)  // ARCHIVE_RETRY (-10) included: a damaged header
      throw Failure(TP_ERR_IO, "webdataset: shard '" + name + "': cannot read the tar header at byte " +
                                   std::to_string(at) + " (" + libarchive_says(a) +
                                   "): the file is cut short or corrupt. Write or copy the shard again, or leave "
                                   "it out of the shard pattern");
    const char* path = archive_entry_pathname(entry);
    if (archive_entry_filetype(entry) == AE_IFREG && path != nullptr) {
      grouper.add(path, at);
      if (first_only && grouper.started()) break;
    }
    if (archive_read_data_skip(a) != ARCHIVE_OK) {
      const int64_t declared = archive_entry_size(entry);
      throw Failure(TP_ERR_IO, "webdataset: shard '" + name + "' is truncated: the member '" +
                                   (path != nullptr ? path : "?") + "' whose header is at byte " + std::to_string(at) +
                                   " declares " + std::to_string(declared) +
                                   " bytes, which run past the end of the file (" + std::to_string(file_size) +
                                   " bytes; " + libarchive_says(a) +
                                   "). The shard was cut short (an interrupted copy or download): copy or write it "
                                   "again, or leave it out of the shard pattern");
    }
  }
  out->samples = grouper.take();
}

/// Closes a file descriptor when the pass ends.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

}  // namespace

bool split_member_name(const std::string& path, std::string* key, std::string* extension) {
  const std::size_t slash = path.rfind('/');
  const std::size_t base = slash == std::string::npos ? 0 : slash + 1;
  const std::size_t dot = path.find('.', base);
  // webdataset's ^((?:.*/|)[^.]+)[.]([^/]*)$: at least one character before the first dot of the
  // basename; an empty extension is refused here too (it can name no field).
  if (dot == std::string::npos || dot == base || dot + 1 == path.size()) return false;
  *key = path.substr(0, dot);
  *extension = path.substr(dot + 1);
  for (char& c : *extension)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return true;
}

bool is_meta_member(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return base.size() >= 2 && base.compare(0, 2, "__") == 0 && base.compare(base.size() - 2, 2, "__") == 0;
}

void SampleGrouper::add(const std::string& path, uint64_t offset) {
  std::string key, extension;
  if (is_meta_member(path) || !split_member_name(path, &key, &extension)) return;
  if (!samples_.empty()) {
    IndexedSample& current = samples_.back();
    const auto& exts = current.extensions;
    if (current.key == key && std::find(exts.begin(), exts.end(), extension) == exts.end()) {
      current.extensions.push_back(std::move(extension));
      return;
    }
  }
  samples_.push_back(IndexedSample{std::move(key), offset, {std::move(extension)}});
}

namespace {

/// index_shard_file's pass, whole or up to the first sample.
ShardIndex index_file(const std::string& path, bool first_only) {
  // O_NONBLOCK: a FIFO named like a shard must not wait for a writer; fstat refuses it below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw Failure(TP_ERR_IO, "webdataset: cannot open shard '" + path + "': " + std::strerror(errno) +
                                 ". Check the shard pattern and the file's permissions");
  const FdCloser closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode))
    throw Failure(TP_ERR_IO, "webdataset: shard '" + path +
                                 "' is not a regular file; shards are read from regular tar files only");
  ShardIndex index;
  index.file_size = static_cast<uint64_t>(info.st_size);
  index.mtime_ns = static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
  if (index.file_size == 0) return index;  // libarchive calls an empty file no archive at all
  ArchivePtr a = new_tar_reader();
  if (archive_read_open_fd(a.get(), fd, kReadBlock) != ARCHIVE_OK) not_a_tar(a.get(), path);
  index_headers(a.get(), path, index.file_size, &index, first_only);
  return index;
}

}  // namespace

ShardIndex index_shard_file(const std::string& path) { return index_file(path, /*first_only=*/false); }

uint64_t first_sample_offset(const std::string& path) {
  const ShardIndex first = index_file(path, /*first_only=*/true);
  return first.samples.empty() ? first.file_size : first.samples.front().offset;
}

ShardIndex index_shard_bytes(const void* data, std::size_t size, const std::string& name) {
  ShardIndex index;
  index.file_size = size;
  if (size == 0) return index;
  ArchivePtr a = new_tar_reader();
  if (archive_read_open_memory(a.get(), data, size) != ARCHIVE_OK) not_a_tar(a.get(), name);
  index_headers(a.get(), name, index.file_size, &index);
  return index;
}

}  // namespace tp::webdataset
