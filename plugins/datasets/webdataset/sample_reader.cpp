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

/// What the header walk of a shard's last sample reads through: pread from `fd` in [pos, limit),
/// in small steps, with skips by arithmetic (libarchive asks to skip member data it does not need).
struct HeaderWalk {
  int fd = -1;
  uint64_t pos = 0;    // the next byte to read, in the shard
  uint64_t limit = 0;  // the shard's end as the index knows it
  int error = 0;       // errno of a failed pread
  unsigned char buffer[8192];
};

la_ssize_t walk_read(struct archive* a, void* data, const void** out) {
  auto* walk = static_cast<HeaderWalk*>(data);
  *out = walk->buffer;
  const uint64_t left = walk->limit - walk->pos;
  const std::size_t want = static_cast<std::size_t>(std::min<uint64_t>(sizeof walk->buffer, left));
  if (want == 0) return 0;
  ssize_t n = 0;
  do {
    n = ::pread(walk->fd, walk->buffer, want, static_cast<off_t>(walk->pos));
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    walk->error = errno;
    archive_set_error(a, errno, "pread: %s", std::strerror(errno));
    return -1;
  }
  walk->pos += static_cast<uint64_t>(n);
  return n;
}

la_int64_t walk_skip(struct archive*, void* data, la_int64_t request) {
  auto* walk = static_cast<HeaderWalk*>(data);
  const uint64_t step = std::min<uint64_t>(static_cast<uint64_t>(std::max<la_int64_t>(request, 0)), walk->limit - walk->pos);
  walk->pos += step;
  return static_cast<la_int64_t>(step);
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

std::vector<unsigned char> ShardFiles::read_sample(std::size_t shard, const SampleSource& source, uint64_t end,
                                                   bool to_file_end) const {
  auto too_large = [&](uint64_t runs_to, const std::string& how) {
    return Failure(TP_ERR_IO, "webdataset: " + source.describe() + ": " + how + " byte " + std::to_string(runs_to) +
                                  ", " + std::to_string(runs_to - source.offset) + " bytes, more than the " +
                                  std::to_string(kMaxSampleBytes) +
                                  " a sample may take (1 GiB; plugins/datasets/webdataset/README.md, \"Limits\"): "
                                  "the shard is damaged or holds a sample no image dataset needs. Write the shard "
                                  "again with smaller samples, or leave it out of the shard pattern");
  };
  if (!to_file_end) {
    if (end - source.offset > kMaxSampleBytes) throw too_large(end, "its bytes run to");
    return read(shard, source.offset, end);
  }
  // The shard's last sample: the index knows where it starts, not where the archive ends (a
  // cached index holds no end). Its headers are walked, data skipped by arithmetic, up to the
  // end-of-archive blocks: a few small reads, never the bytes after the archive.
  const std::shared_ptr<const OpenShard> file = acquire(shard);
  HeaderWalk walk;
  walk.fd = file->fd;
  walk.pos = source.offset;
  walk.limit = end;
  MemoryArchive a(archive_read_new(), &archive_read_free);
  if (!a) throw Failure(TP_ERR_OUT_OF_MEMORY, "webdataset: libarchive could not allocate a reader");
  archive_read_support_format_tar(a.get());
  archive_read_set_read_callback(a.get(), &walk_read);
  archive_read_set_skip_callback(a.get(), &walk_skip);
  archive_read_set_callback_data(a.get(), &walk);
  auto broken = [&](const std::string& what) {
    return Failure(TP_ERR_IO, "webdataset: " + source.describe() + ": " + what +
                                  ". Write or copy the shard again, or leave it out of the shard pattern");
  };
  if (archive_read_open1(a.get()) != ARCHIVE_OK)
    throw broken("its bytes do not start with a tar header (libarchive: " + archive_message(a.get()) +
                 "); the shard changed after the dataset indexed it");
  uint64_t archive_end = end;
  for (;;) {
    struct archive_entry* entry = nullptr;
    const int status = archive_read_next_header(a.get(), &entry);
    const uint64_t at = source.offset + static_cast<uint64_t>(archive_read_header_position(a.get()));
    if (status == ARCHIVE_EOF) {
      archive_end = at;  // the end-of-archive blocks (or the file's end) start here
      break;
    }
    if (walk.error != 0)
      throw Failure(TP_ERR_IO, "webdataset: cannot read shard '" + source.shard + "' at byte " +
                                   std::to_string(walk.pos) + ": " + std::strerror(walk.error));
    if (status != ARCHIVE_OK && status != ARCHIVE_WARN)
      throw broken("cannot read the tar header at byte " + std::to_string(at) + " (libarchive: " +
                   archive_message(a.get()) + ")");
    // A member's declared size counts before it is skipped: the walk stops at the first header
    // that would take the sample past the limit.
    const int64_t declared = std::max<int64_t>(archive_entry_size(entry), 0);
    if (at + 512 + static_cast<uint64_t>(declared) - source.offset > kMaxSampleBytes)
      throw too_large(at + 512 + static_cast<uint64_t>(declared), "its member at byte " + std::to_string(at) +
                                                                        " runs to");
    if (archive_read_data_skip(a.get()) != ARCHIVE_OK)
      throw broken("the member whose header is at byte " + std::to_string(at) + " declares " +
                   std::to_string(declared) + " bytes, which run past the end of the file (" + std::to_string(end) +
                   " bytes; libarchive: " + archive_message(a.get()) + "): the shard is truncated");
  }
  if (archive_end - source.offset > kMaxSampleBytes) throw too_large(archive_end, "its bytes run to");
  return read(shard, source.offset, archive_end);
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
