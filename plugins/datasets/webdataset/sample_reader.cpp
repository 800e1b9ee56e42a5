#include "sample_reader.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "tar_index.h"
#include "tp/cpp/guard.h"

namespace tp::webdataset {
namespace {

using tp::cpp::Failure;

using MemoryArchive = std::unique_ptr<struct archive, int (*)(struct archive*)>;

std::string archive_message(struct archive* a) {
  const char* text = archive_error_string(a);
  return text != nullptr ? text : "no message";
}

/// Why a member path could reach outside the directory it is extracted to: "" when it cannot.
std::string unsafe_path(const std::string& path) {
  if (!path.empty() && path[0] == '/') return "is absolute";
  std::size_t from = 0;
  for (;;) {
    const std::size_t slash = path.find('/', from);
    if (path.compare(from, slash == std::string::npos ? std::string::npos : slash - from, "..") == 0)
      return "has a '..' component";
    if (slash == std::string::npos) return "";
    from = slash + 1;
  }
}

}  // namespace

ShardFiles::OpenShard::~OpenShard() {
  if (fd >= 0) ::close(fd);
}

ShardFiles::ShardFiles(std::vector<std::string> paths, std::size_t max_open)
    : paths_(std::move(paths)), max_open_(std::max<std::size_t>(1, max_open)), advised_(paths_.size(), false) {}

std::size_t ShardFiles::open_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_.size();
}

std::shared_ptr<const ShardFiles::OpenShard> ShardFiles::acquire(std::size_t shard) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = open_.find(shard);
    if (found != open_.end()) {
      recent_.splice(recent_.begin(), recent_, found->second.in_recent);
      return found->second.file;
    }
  }
  // Opened outside the lock: an open() on a slow file system must not stall the workers whose
  // shards are already open.
  auto file = std::make_shared<OpenShard>();
  file->fd = ::open(paths_[shard].c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (file->fd < 0)
    throw Failure(TP_ERR_IO, "webdataset: cannot open shard '" + paths_[shard] + "': " + std::strerror(errno) +
                                 " (it was indexed when the dataset was created: was it moved or deleted?)");
  // The sampler reads a shard's samples together: let the kernel read ahead in large steps
  // (SEQUENTIAL is per open file, so on every open) and start reading the whole shard now
  // (WILLNEED fills the page cache, shared by every descriptor: once per shard).
  ::posix_fadvise(file->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  bool first_open = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = open_.find(shard);
    if (found != open_.end()) {  // another worker opened it meanwhile: use theirs, close ours
      recent_.splice(recent_.begin(), recent_, found->second.in_recent);
      return found->second.file;
    }
    first_open = !advised_[shard];
    advised_[shard] = true;
    if (open_.size() >= max_open_) {
      open_.erase(recent_.back());  // closed when its last reader is done
      recent_.pop_back();
    }
    recent_.push_front(shard);
    open_.emplace(shard, Slot{file, recent_.begin()});
  }
  // Outside the lock: WILLNEED queues the reads of the whole file, which may take a moment.
  if (first_open) ::posix_fadvise(file->fd, 0, 0, POSIX_FADV_WILLNEED);
  return file;
}

std::vector<unsigned char> ShardFiles::read(std::size_t shard, uint64_t begin, uint64_t end) const {
  const std::shared_ptr<const OpenShard> file = acquire(shard);
  std::vector<unsigned char> bytes(static_cast<std::size_t>(end - begin));
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t n = ::pread(file->fd, bytes.data() + filled, bytes.size() - filled,
                              static_cast<off_t>(begin + filled));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw Failure(TP_ERR_IO, "webdataset: cannot read shard '" + paths_[shard] + "' at byte " +
                                   std::to_string(begin + filled) + ": " + std::strerror(errno));
    if (n == 0)
      throw Failure(TP_ERR_IO, "webdataset: shard '" + paths_[shard] + "' ends at byte " +
                                   std::to_string(begin + filled) + ", before the sample that runs to byte " +
                                   std::to_string(end) +
                                   ": it changed after the dataset indexed it. Do not rewrite shards during a run; "
                                   "start the run again to index it anew");
    filled += static_cast<std::size_t>(n);
  }
  return bytes;
}

std::string SampleSource::describe() const {
  return "shard '" + shard + "', sample '" + key + "' at byte " + std::to_string(offset);
}

std::vector<std::optional<std::vector<unsigned char>>> read_sample_members(const std::vector<unsigned char>& region,
                                                                           const std::vector<std::string>& wanted,
                                                                           const SampleSource& source) {
  MemoryArchive a(archive_read_new(), &archive_read_free);
  if (!a) throw Failure(TP_ERR_OUT_OF_MEMORY, "webdataset: libarchive could not allocate a reader");
  archive_read_support_format_tar(a.get());
  auto broken = [&](const std::string& what) {
    return Failure(TP_ERR_IO, "webdataset: " + source.describe() + ": " + what +
                                  ". Write or copy the shard again, or leave it out of the shard pattern");
  };
  if (archive_read_open_memory(a.get(), region.data(), region.size()) != ARCHIVE_OK)
    throw broken("its bytes do not start with a tar header (libarchive: " + archive_message(a.get()) +
                 "); the shard changed after the dataset indexed it");
  std::vector<std::optional<std::vector<unsigned char>>> found(wanted.size());
  for (;;) {
    struct archive_entry* entry = nullptr;
    const int status = archive_read_next_header(a.get(), &entry);
    if (status == ARCHIVE_EOF) break;  // the region ends where the next sample's header starts
    const uint64_t at = source.offset + static_cast<uint64_t>(archive_read_header_position(a.get()));
    if (status != ARCHIVE_OK && status != ARCHIVE_WARN)  // ARCHIVE_RETRY (-10) included: a damaged header
      throw broken("cannot read the tar header at byte " + std::to_string(at) + " (libarchive: " +
                   archive_message(a.get()) + ")");
    const char* raw_path = archive_entry_pathname(entry);
    const std::string path = raw_path != nullptr ? raw_path : "";
    const std::string why = unsafe_path(path);
    if (!why.empty())
      throw broken("the member '" + path + "' at byte " + std::to_string(at) + " " + why +
                   ": a shard's member paths stay inside it (relative, no '..'), as webdataset writes them");
    std::string key, extension;
    if (archive_entry_filetype(entry) != AE_IFREG || is_meta_member(path) ||
        !split_member_name(path, &key, &extension))
      continue;  // skipped by the index too
    if (key != source.key)
      throw broken("its bytes hold the member '" + path + "' at byte " + std::to_string(at) +
                   " of another sample; the shard changed after the dataset indexed it");
    const auto slot = std::find(wanted.begin(), wanted.end(), extension);
    if (slot == wanted.end() || found[static_cast<std::size_t>(slot - wanted.begin())]) continue;
    // The declared size is the shard's claim: never allocate more than the region holds.
    const int64_t declared = archive_entry_size(entry);
    if (declared < 0 || static_cast<uint64_t>(declared) > region.size())
      throw broken("the member '" + path + "' at byte " + std::to_string(at) + " declares " +
                   std::to_string(declared) + " bytes, more than the sample's " + std::to_string(region.size()) +
                   ": the shard is truncated or corrupt");
    std::vector<unsigned char> data(static_cast<std::size_t>(declared));
    std::size_t filled = 0;
    while (filled < data.size()) {
      const la_ssize_t n = archive_read_data(a.get(), data.data() + filled, data.size() - filled);
      if (n < 0)
        throw broken("the member '" + path + "' at byte " + std::to_string(at) + " is cut short (libarchive: " +
                     archive_message(a.get()) + "): the shard is truncated");
      if (n == 0) break;
      filled += static_cast<std::size_t>(n);
    }
    if (filled != data.size())
      throw broken("the member '" + path + "' at byte " + std::to_string(at) + " holds " + std::to_string(filled) +
                   " of its " + std::to_string(declared) + " bytes: the shard is truncated");
    found[static_cast<std::size_t>(slot - wanted.begin())] = std::move(data);
  }
  return found;
}

}  // namespace tp::webdataset
