#include "sweep/sweep_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "tp/framework/error.h"
#include "tp/framework/util/write_error.h"

namespace tp::cli {

SweepLock::SweepLock(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / "sweep.lock";
  // No O_CLOEXEC: the cells inherit the lock (sweep_lock.h says why).
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT, 0644);
  if (fd_ < 0) throw Error("host sweep: cannot open " + file.string() + ": " + describe_write_error(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char pid[32] = {};
    const ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (error != EWOULDBLOCK)
      throw Error("host sweep: cannot lock " + file.string() + ": " + std::strerror(error) + ".");
    const std::string holder = n > 0 ? std::string(pid, static_cast<std::size_t>(n)) : std::string();
    throw Error("host sweep: another sweep is running in " + dir.string() +
                (holder.empty() ? "" : " (pid " + holder.substr(0, holder.find('\n')) + ", or a cell it started)") +
                ": it holds " + file.string() + ". Two sweeps in one directory would train the same cells at once "
                "and overwrite each other's sweep.toml. Wait for it to finish, or give this sweep another "
                "--output-dir.");
  }
  // For the message above only; the lock is the flock, not this content.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
}

SweepLock::~SweepLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace tp::cli
