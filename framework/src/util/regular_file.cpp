#include "tp/framework/util/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tp {
namespace {

/// Closes the descriptor on every way out of read_regular_file.
struct Descriptor {
  int fd;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void refuse(const std::string& clause) { throw UnreadableFile(clause); }

}  // namespace

const char* file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISDIR(mode)) return "a directory";
  return "not a regular file";
}

std::vector<char> read_regular_file(const std::filesystem::path& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (SIGTERM and Ctrl-C would not end the
  // wait: `host train` catches them); fstat then refuses it before any read.
  const Descriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (file.fd < 0) refuse(std::string("cannot be opened (") + std::strerror(errno) + ")");
  struct stat info {};
  if (::fstat(file.fd, &info) != 0) refuse(std::string("cannot be read (") + std::strerror(errno) + ")");
  if (!S_ISREG(info.st_mode)) refuse(std::string("is ") + file_kind(info.st_mode) + ", not a regular file");
  // Blocking again: a regular file on a network file system may still return EAGAIN otherwise.
  ::fcntl(file.fd, F_SETFL, ::fcntl(file.fd, F_GETFL) & ~O_NONBLOCK);
  std::vector<char> bytes(static_cast<std::size_t>(info.st_size));
  std::size_t filled = 0;
  char probe = 0;
  // One more byte than fstat gave is asked for last: a file that grew meanwhile is refused, not cut.
  while (true) {
    const bool past_end = filled == bytes.size();
    const ssize_t n = past_end ? ::read(file.fd, &probe, 1) : ::read(file.fd, bytes.data() + filled, bytes.size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) refuse(std::string("cannot be read (") + std::strerror(errno) + ")");
    if (n == 0 && past_end) return bytes;
    if (n == 0 || past_end) refuse("changed size while it was read (is a process writing it?)");
    filled += static_cast<std::size_t>(n);
  }
}

}  // namespace tp
