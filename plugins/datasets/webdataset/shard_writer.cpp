#include "shard_writer.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <utility>

#include "listing_text.h"
#include "tp/cpp/guard.h"

namespace tp::webdataset {
namespace {

namespace fs = std::filesystem;
using tp::cpp::Failure;
constexpr uint64_t kBlock = 512;
constexpr uint64_t kEndOfArchive = 2 * kBlock;  // two zero blocks close a tar

uint64_t padded(uint64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

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
      if (datasets::lower_case(members[j].extension) == datasets::lower_case(ext))
        refuse(key, "has the extension '" + ext + "' twice (extensions are compared in lower case)");
  }
}

constexpr std::size_t kRandomChars = 12;
constexpr const char* kPartialMarker = ".partial-";

/// `n` characters of [A-Za-z0-9] from the system's random source: a partial directory's name no
/// one can predict (std::random_device where getrandom fails).
std::string random_chars(std::size_t n) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::vector<unsigned char> bytes(n);
  if (::getrandom(bytes.data(), n, 0) != static_cast<ssize_t>(n)) {
    std::random_device device;
    for (unsigned char& b : bytes) b = static_cast<unsigned char>(device());
  }
  std::string out(n, 'x');
  for (std::size_t i = 0; i < n; ++i) out[i] = kAlphabet[bytes[i] % (sizeof kAlphabet - 1)];
  return out;
}

/// The pid of a partial directory of `prefix` (`.<prefix>.<12 of [A-Za-z0-9]>.partial-<pid>`),
/// or -1 when `name` is not one.
long partial_pid(const std::string& name, const std::string& prefix) {
  const std::string head = "." + prefix + ".";
  const std::size_t marker = head.size() + kRandomChars;
  if (name.size() <= marker + std::strlen(kPartialMarker) || name.compare(0, head.size(), head) != 0 ||
      name.compare(marker, std::strlen(kPartialMarker), kPartialMarker) != 0)
    return -1;
  for (std::size_t i = head.size(); i < marker; ++i)
    if (!std::isalnum(static_cast<unsigned char>(name[i]))) return -1;
  const char* digits = name.data() + marker + std::strlen(kPartialMarker);
  const char* end = name.data() + name.size();
  long pid = -1;
  const auto [stop, error] = std::from_chars(digits, end, pid);
  return error == std::errc{} && stop == end && pid > 0 && end - digits <= 9 ? pid : -1;
}

/// Removes `out_dir`'s partial directories of `prefix` that a process now gone left (killed
/// outright mid-write): directories, not links, owned by this user. Returns their paths.
std::vector<std::string> sweep_stale_partials(const std::string& out_dir, const std::string& prefix) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out_dir, ec)) {
    const std::string name = entry.path().filename().string();
    const long pid = partial_pid(name, prefix);
    struct stat info {};
    if (pid <= 0 || pid == ::getpid() || ::lstat(entry.path().c_str(), &info) != 0 || !S_ISDIR(info.st_mode) ||
        info.st_uid != ::geteuid())
      continue;
    // kill(pid, 0) == 0: alive; EPERM: alive under another user. Only ESRCH means gone.
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    if (fs::remove_all(entry.path(), ignored) > 0 && !ignored) removed.push_back(entry.path().string());
  }
  return removed;
}

std::string errno_text(int error) { return std::strerror(error); }

/// Moves `from` to `to` unless `to` exists (a file, a directory or a symbolic link, which is never
/// followed): renameat2(RENAME_NOREPLACE), or link + unlink where the file system lacks it.
/// Returns 0 or the errno.
int move_no_replace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  if (::link(from.c_str(), to.c_str()) != 0) return errno;
  ::unlink(from.c_str());
  return 0;
}

/// fsync of a file or directory by path; 0 or the errno.
int sync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | flags);
  if (fd < 0) return errno;
  const int result = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return result;
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
  if (prefix_.empty() || prefix_.find('/') != std::string::npos || prefix_ == "." || prefix_ == "..")
    throw Failure(TP_ERR_INVALID_ARGUMENT, "shard writer: the prefix '" + prefix_ +
                                               "' must be a non-empty file name (the directory is out_dir)");
  std::error_code ec;
  fs::create_directories(out_dir_, ec);
  if (ec || !fs::is_directory(out_dir_))
    throw Failure(TP_ERR_IO, "shard writer: cannot create the directory '" + out_dir_ + "' (" +
                                 (ec ? ec.message() : std::string("it exists and is not a directory")) + ")");
  swept_ = sweep_stale_partials(out_dir_, prefix_);
  // mkdir creates a new directory or fails: never an existing name, never through a link.
  for (int attempt = 0;; ++attempt) {
    const std::string name = "." + prefix_ + "." + random_chars(kRandomChars) + kPartialMarker +
                             std::to_string(::getpid());
    const std::string path = (fs::path(out_dir_) / name).string();
    if (::mkdir(path.c_str(), 0700) == 0) {
      partial_dir_ = path;
      break;
    }
    if (errno != EEXIST || attempt == 100)
      throw Failure(TP_ERR_IO, "shard writer: cannot create a partial directory in '" + out_dir_ + "' (" +
                                   errno_text(errno) + "); the shards are written there first. Check that the "
                                   "directory is writable");
  }
}

ShardWriter::~ShardWriter() {
  if (!finished_) remove_partial();
}

void ShardWriter::remove_partial() {
  archive_.reset();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  std::error_code ec;
  if (!partial_dir_.empty()) fs::remove_all(partial_dir_, ec);
}

void ShardWriter::open_shard() {
  char name[32];
  std::snprintf(name, sizeof name, "-%06zu.tar", names_.size());
  current_ = prefix_ + name;
  const std::string path = (fs::path(partial_dir_) / current_).string();
  archive_.reset(archive_write_new());
  struct archive* a = archive_.get();
  if (a == nullptr) throw Failure(TP_ERR_OUT_OF_MEMORY, "shard writer: libarchive could not allocate a writer");
  // A new file in the writer's own directory, never an existing one or a link (0666 less the
  // umask, as any file the user creates).
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    const int error = errno;
    archive_.reset();
    throw Failure(TP_ERR_IO, "shard writer: cannot create the shard '" + path + "': " + errno_text(error));
  }
  // No padding of the last block to libarchive's 10 KiB records: the file ends right after the
  // end-of-archive blocks, so its size is what sample_tar_bytes counts (tarfile reads either).
  if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK || archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
      archive_write_open_fd(a, fd_) != ARCHIVE_OK) {
    const std::string why = archive_error_string(a) != nullptr ? archive_error_string(a) : errno_text(errno);
    archive_.reset();
    throw Failure(TP_ERR_IO, "shard writer: cannot create the shard '" + path + "': " + why);
  }
  samples_in_shard_ = 0;
}

void ShardWriter::close_shard() {
  struct archive* a = archive_.get();
  const bool closed = archive_write_close(a) == ARCHIVE_OK;
  const std::string why = archive_error_string(a) != nullptr ? archive_error_string(a) : "";
  archive_.reset();
  // fsync before the shard counts as complete: a full disk or a failing device is reported here,
  // naming the shard, not found by the reader later.
  const int synced = ::fsync(fd_) == 0 ? 0 : errno;
  const int close_error = ::close(fd_) == 0 ? 0 : errno;
  fd_ = -1;
  if (!closed || synced != 0 || close_error != 0) {
    const std::string reason = !why.empty() ? why : errno_text(synced != 0 ? synced : close_error);
    throw Failure(TP_ERR_IO, "shard writer: cannot complete the shard '" + current_ + "' (in '" + partial_dir_ +
                                 "'): " + reason);
  }
  names_.push_back(current_);
}

void ShardWriter::add(const std::string& key, const std::vector<ShardMember>& members) {
  if (finished_) throw Failure(TP_ERR_INVALID_ARGUMENT, "shard writer: add() after finish()");
  check_sample(key, last_key_, members);
  if (const uint64_t bytes = sample_tar_bytes(key, members); bytes > kMaxSampleBytes)
    refuse(key, "would take " + std::to_string(bytes) + " bytes in its shard, more than the " +
                    std::to_string(kMaxSampleBytes) + " the reader accepts in one sample (kMaxSampleBytes, 1 GiB)");
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
                                   "' to the shard '" + current_ + "' (in '" + partial_dir_ + "'): " +
                                   (archive_error_string(a) != nullptr ? archive_error_string(a) : "no message"));
  }
  ++samples_in_shard_;
  ++written_.samples;
  last_key_ = key;
}

WrittenShards ShardWriter::finish(const std::string& description_name,
                                  const std::function<std::string(const WrittenShards&)>& describe) {
  if (finished_) throw Failure(TP_ERR_INVALID_ARGUMENT, "shard writer: finish() called twice");
  if (archive_) close_shard();
  const std::size_t n = names_.size();
  for (const std::string& name : names_) written_.paths.push_back((fs::path(out_dir_) / name).string());
  if (n == 1) {
    written_.pattern = written_.paths.front();
  } else if (n > 1) {
    char range[48];
    std::snprintf(range, sizeof range, "-{000000..%06zu}.tar", n - 1);
    written_.pattern = (fs::path(out_dir_) / (prefix_ + range)).string();
  }
  std::vector<std::string> to_move = names_;
  if (!description_name.empty()) {
    if (description_name.find('/') != std::string::npos)
      throw Failure(TP_ERR_INVALID_ARGUMENT, "shard writer: the description's name '" + description_name +
                                                 "' must be a file name");
    const std::string text = describe ? describe(written_) : std::string();
    const std::string path = (fs::path(partial_dir_) / description_name).string();
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    bool ok = fd >= 0;
    int error = ok ? 0 : errno;
    for (std::size_t done = 0; ok && done < text.size();) {
      const ssize_t wrote = ::write(fd, text.data() + done, text.size() - done);
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote <= 0) {
        ok = false;
        error = wrote < 0 ? errno : ENOSPC;
        break;
      }
      done += static_cast<std::size_t>(wrote);
    }
    if (ok && ::fsync(fd) != 0) {
      ok = false;
      error = errno;
    }
    if (fd >= 0 && ::close(fd) != 0 && ok) {
      ok = false;
      error = errno;
    }
    if (!ok)
      throw Failure(TP_ERR_IO, "shard writer: cannot write the description '" + path + "': " + errno_text(error));
    to_move.push_back(description_name);
  }
  // Into place, in order, none over an existing name; the description (when any) last.
  std::vector<std::pair<std::string, struct stat>> moved;
  for (const std::string& name : to_move) {
    const std::string from = (fs::path(partial_dir_) / name).string();
    const std::string to = (fs::path(out_dir_) / name).string();
    struct stat info {};
    const int error = ::lstat(from.c_str(), &info) != 0 ? errno : move_no_replace(from, to);
    if (error == 0) {
      moved.emplace_back(to, info);
      continue;
    }
    // Take back what this write moved (only files that are still the ones it moved), so the
    // directory holds no part of the set; the destructor removes the partial directory.
    for (const auto& [path, was] : moved) {
      struct stat now {};
      if (::lstat(path.c_str(), &now) == 0 && now.st_dev == was.st_dev && now.st_ino == was.st_ino)
        ::unlink(path.c_str());
    }
    throw Failure(TP_ERR_IO, "shard writer: cannot move '" + name + "' into '" + out_dir_ + "': " +
                                 errno_text(error) +
                                 (error == EEXIST ? " (a file or link of that name was placed there during the "
                                                    "write, or another write of the same prefix finished first; "
                                                    "it is left as it is)"
                                                  : std::string()) +
                                 ". None of this write's " + std::to_string(n) + " shards is left in '" + out_dir_ +
                                 "'");
  }
  finished_ = true;
  // The renames are durable once the directory is; the partial directory is empty now.
  sync_path(out_dir_, O_DIRECTORY);
  ::rmdir(partial_dir_.c_str());
  return std::move(written_);
}

}  // namespace tp::webdataset
