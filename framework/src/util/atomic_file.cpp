#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tp/framework/util/atomic_file.h"
#include "tp/framework/error.h"
#include "tp/framework/util/write_error.h"

namespace tp {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what, int error, const std::string& tmp) {
  if (!tmp.empty()) ::unlink(tmp.c_str());
  throw Error("cannot write " + path.string() + ": " + what + " failed: " + describe_write_error(error) +
              " The previous version of the file, if any, is unchanged.");
}

/// Refuses to replace `path` when it exists and is not a regular file (or a link to one): a
/// rename over a device, a FIFO or a socket would replace the node itself (`/dev/null` as root).
void refuse_special_file(const std::filesystem::path& path) {
  std::error_code ignored;
  const std::filesystem::file_status status = std::filesystem::status(path, ignored);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw Error("cannot write " + path.string() + ": it exists and is not a regular file (a directory, a device, a "
                "FIFO or a socket), which the host never replaces. It is unchanged; choose another path.");
}

}  // namespace

void sync_directory(const std::filesystem::path& dir) {
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd); // makes a rename or a removal in `dir` itself durable
    ::close(dir_fd);
  }
}

void link_file_atomically(const std::filesystem::path& existing, const std::filesystem::path& target) {
  refuse_special_file(target);
  const std::filesystem::path dir = target.parent_path().empty() ? "." : target.parent_path();
  const std::string tmp = (dir / ("." + target.filename().string() + ".link-" + std::to_string(::getpid()))).string();
  ::unlink(tmp.c_str()); // a leftover of a crashed run with the same pid
  if (::link(existing.c_str(), tmp.c_str()) == 0) {
    if (::rename(tmp.c_str(), target.c_str()) != 0) fail(target, "rename", errno, tmp);
    sync_directory(dir);
    return;
  }
  if (errno != EXDEV && errno != EPERM && errno != EMLINK && errno != ENOTSUP)
    fail(target, "link(" + existing.string() + ")", errno, "");
  std::ifstream in(existing, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) fail(target, "read(" + existing.string() + ")", EIO, "");
  write_file_atomically(target, bytes.data(), bytes.size());
}

void write_file_atomically(const std::filesystem::path& path, const char* bytes, std::size_t size) {
  refuse_special_file(path);
  const std::filesystem::path dir = path.parent_path().empty() ? "." : path.parent_path();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  // Same directory as the target, so rename() is atomic (never crosses a file system).
  const std::string tmp = (dir / ("." + path.filename().string() + ".tmp-" + std::to_string(::getpid()))).string();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, "open(" + tmp + ")", errno, "");
  std::size_t written = 0;
  while (written < size) {
    const ssize_t n = ::write(fd, bytes + written, size - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : ENOSPC;
      ::close(fd);
      fail(path, "write", error, tmp);
    }
    written += static_cast<std::size_t>(n);
  }
  // fsync before rename: otherwise a power cut can leave a renamed but empty file.
  if (::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    fail(path, "fsync", error, tmp);
  }
  if (::close(fd) != 0) fail(path, "close", errno, tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail(path, "rename", errno, tmp);
  sync_directory(dir);
}

}  // namespace tp
