#include "tp/framework/util/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tp/framework/error.h"
#include "tp/framework/util/write_error.h"

namespace tp {

FileLock::FileLock(const std::filesystem::path& file, bool inherit) {
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  // 0666 less the umask: with a team's umask 002 a teammate can take the lock to continue a run.
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | (inherit ? 0 : O_CLOEXEC), 0666);
  // An existing file we may not write is the file's mode, not the directory's: the message says whose.
  if (fd < 0) throw Error("cannot open the lock file " + file.string() + ": " + describe_open_error(file, errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char pid[32] = {};
    const ssize_t n = ::pread(fd, pid, sizeof pid - 1, 0);
    ::close(fd);
    if (error != EWOULDBLOCK) throw Error("cannot lock " + file.string() + ": " + std::strerror(error) + ".");
    holder_ = n > 0 ? std::string(pid, static_cast<std::size_t>(n)) : std::string();
    holder_ = holder_.substr(0, holder_.find('\n'));
    return;
  }
  fd_ = fd;
  const std::string own = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, own.data(), own.size(), 0);
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

bool lock_held_elsewhere(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd); // drops the shared lock if it was taken
  return held;
}

}  // namespace tp
