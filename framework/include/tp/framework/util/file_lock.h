// One process (and the children it hands the lock to) at a time on a directory: an exclusive
// flock(2) on a lock file in it, for `host sweep` (sweep.lock) and `host train` (run.lock).
#pragma once

#include <filesystem>
#include <string>

namespace tp {

/// An exclusive flock(2) on `file`, tried without waiting and held while this object lives. The
/// file records the holder's pid for messages only: the lock is the flock, which the kernel drops
/// when the last process holding the descriptor exits, however it ends, so a stale file never
/// blocks anything. [main].
class FileLock {
 public:
  /// Creates `file`'s directory and `file`, and tries the lock. `inherit`: child processes started
  /// later keep the descriptor, and so the lock (a sweep's cells). Throws tp::Error naming the file
  /// when it cannot be opened or locked for another reason than another holder.
  FileLock(const std::filesystem::path& file, bool inherit);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  /// Whether this process holds the lock; when not, holder() is the pid the holder recorded.
  bool held() const noexcept { return fd_ >= 0; }
  /// The holder's pid as it wrote it ("" when unknown); empty while this object holds the lock.
  const std::string& holder() const noexcept { return holder_; }

 private:
  int fd_ = -1;
  std::string holder_;
};

/// Whether another process holds the lock on `file` now, asked without creating or writing it
/// (`host compare` reads run directories only): a shared flock tried on a read-only descriptor.
/// False when the file is absent, unreadable or a link.
bool lock_held_elsewhere(const std::filesystem::path& file);

}  // namespace tp
