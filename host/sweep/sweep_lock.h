// One `host sweep` per sweep directory: two on the same directory would train the same cells at
// once (each resuming the other's checkpoints) and rewrite each other's sweep.toml.
#pragma once

#include <filesystem>

#include "tp/framework/util/file_lock.h"

namespace tp::cli {

/// An exclusive flock(2) on `<dir>/sweep.lock`, held while this object lives and while any cell
/// process it started still runs (the descriptor is inherited on purpose: a sweep killed with
/// kill -9 leaves its running cell saving, and a new sweep must not start that cell meanwhile).
/// The kernel drops the lock when the last of those processes exits, however it ends, so a
/// stale lock file never blocks anything. [main].
class SweepLock {
 public:
  /// Creates `dir` and takes the lock without waiting. Throws tp::Error at once, naming the
  /// directory and the pid recorded in the lock file, when another sweep holds it.
  explicit SweepLock(const std::filesystem::path& dir);

 private:
  FileLock lock_;
};

}  // namespace tp::cli
