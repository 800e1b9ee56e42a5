// The ops trial (finding 6): a run's files were created 0644 whatever the umask, so in a team's
// setgid directory (umask 002) a teammate could not continue a run ("cannot open the lock file
// run1/run.lock: Permission denied. Check the directory's permissions.", blaming the directory).
// Files are now created 0666 less the umask, as any tool creates them; the lock file's error names
// the file's owner and mode. The umask is process-wide: each case sets it and puts it back.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>

#include "support/other_user.h"
#include "tp/framework/error.h"
#include "tp/framework/monitor/history.h"
#include "tp/framework/util/atomic_file.h"
#include "tp/framework/util/file_lock.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;

/// Sets the process's umask while it lives, then restores the one before.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : before_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(before_); }
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;

 private:
  mode_t before_;
};

/// An empty directory of this test's own under the system's temporary directory.
fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / "tp_file_modes_test" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

mode_t mode_of(const fs::path& file) {
  struct stat info {};
  REQUIRE(::stat(file.c_str(), &info) == 0);
  return info.st_mode & 07777;
}

}  // namespace

TEST_CASE("a run's files are 0666 less the umask: group-writable under a team's umask 002, private under 077") {
  const fs::path dir = fresh_dir("file_modes_umask");
  for (const auto& [mask, want] : {std::pair<mode_t, mode_t>{002, 0664}, {022, 0644}, {077, 0600}}) {
    CAPTURE(mask);
    const fs::path run = dir / ("umask_" + std::to_string(mask));
    fs::create_directories(run);
    const ScopedUmask umask(mask);
    tp::write_file_atomically(run / "config.toml", "[run]\n");
    CHECK(mode_of(run / "config.toml") == want);
    {
      const tp::FileLock lock(run / "run.lock", /*inherit=*/false);
      CHECK(lock.held());
    }
    CHECK(mode_of(run / "run.lock") == want);
    { tp::History history(run, /*enabled=*/true); }
    CHECK(mode_of(run / "history.jsonl") == want);
  }
}

TEST_CASE("a lock file another user may not write is named with its owner and mode, not blamed on the directory") {
  if (!tp::test::other_user_is_distinct()) return;  // needs another uid (the CI runs as root)
  const fs::path dir = fresh_dir("file_modes_lock_owner");
  REQUIRE(::chmod(dir.c_str(), 02777) == 0);  // the directory lets everyone in: only the file's mode refuses
  {
    const ScopedUmask umask(022);  // as alice ran in the trial
    const tp::FileLock lock(dir / "run.lock", /*inherit=*/false);
  }
  REQUIRE(mode_of(dir / "run.lock") == 0644);
  CHECK(tp::test::as_other_user([&] {
    try {
      const tp::FileLock lock(dir / "run.lock", /*inherit=*/false);
    } catch (const tp::Error& e) {
      const std::string what = e.what();
      return what.find("cannot open the lock file " + (dir / "run.lock").string() +
                       ": Permission denied: the file exists, owned by uid 0 (root), group 0, mode 0644, which "
                       "does not let you (uid 65534") != std::string::npos &&
             what.find("umask 002") != std::string::npos && what.find("directory's permissions") == std::string::npos;
    }
    return false;
  }));
}
