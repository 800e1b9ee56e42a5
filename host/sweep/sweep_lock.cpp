#include "sweep/sweep_lock.h"

#include "tp/framework/error.h"

namespace tp::cli {

SweepLock::SweepLock(const std::filesystem::path& dir) : lock_(dir / "sweep.lock", /*inherit=*/true) {
  if (lock_.held()) return;
  const std::string& holder = lock_.holder();
  throw Error("host sweep: another sweep is running in " + dir.string() +
              (holder.empty() ? "" : " (pid " + holder + ", or a cell it started)") + ": it holds " +
              (dir / "sweep.lock").string() + ". Two sweeps in one directory would train the same cells at once "
              "and overwrite each other's sweep.toml. Wait for it to finish, or give this sweep another "
              "--output-dir.");
}

}  // namespace tp::cli
