// earlier/'s attempt directories are bounded (soak trial F5): prune_earlier_attempts keeps the
// newest kKeepEarlierAttempts that set_earlier_run_aside marked, touches nothing else in earlier/,
// and follows no link, neither in earlier/ nor inside an attempt it removes.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tp/framework/checkpoint/run_identity.h"

#include <doctest/doctest.h>

namespace fs = std::filesystem;

namespace {

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

/// One attempt that stopped before its first save: a history and a train.log, set aside.
fs::path attempt(const fs::path& run_dir, int i) {
  write(run_dir / "history.jsonl", "{\"kind\":\"step\",\"step\":" + std::to_string(i) + "}\n");
  write(run_dir / "train.log", "attempt " + std::to_string(i) + "\n");
  fs::create_directories(run_dir / "plots");
  write(run_dir / "plots" / "loss.png", "png");
  return tp::set_earlier_run_aside(run_dir, /*attempt=*/true);
}

}  // namespace

TEST_CASE("earlier/ keeps the newest attempts the host set aside, and nothing else is touched") {
  const fs::path root = fs::temp_directory_path() / ("earlier_attempts_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const fs::path run = root / "run";
  const fs::path earlier = run / "earlier";
  const fs::path outside = root / "outside";
  write(outside / "precious.txt", "keep");
  write(outside / ".torchhost-attempt", "a marker elsewhere");

  // A --new-run's directory (an earlier run's checkpoints): no marker, never pruned.
  write(run / "checkpoints" / "last.pt", "ckpt");
  write(run / "history.jsonl", "{}\n");
  const fs::path new_run = tp::set_earlier_run_aside(run);
  CHECK_FALSE(fs::exists(new_run / ".torchhost-attempt"));
  // The user's own directories named like the host's, unmarked, and a link named like one.
  write(earlier / "20000101-000000" / "notes.txt", "mine");
  fs::create_directory_symlink(outside, earlier / "20000101-000001");
  write(earlier / "20000101-000002-x" / ".torchhost-attempt", "not the host's name");

  std::vector<fs::path> made;
  for (int i = 0; i < 13; ++i) made.push_back(attempt(run, i));  // same second: -2 ... -13 suffixes
  // The oldest attempt holds a link out of the run directory: removed as a link, never followed.
  fs::create_symlink(outside / "precious.txt", made[0] / "link.txt");
  fs::create_directory_symlink(outside, made[0] / "plots" / "linked_dir");
  for (const auto& dir : made) CHECK(fs::is_regular_file(dir / ".torchhost-attempt"));

  const tp::PrunedAttempts pruned = tp::prune_earlier_attempts(run);
  CHECK(pruned.failed.empty());
  REQUIRE(pruned.removed.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(pruned.removed[i] == made[i]);
    CHECK_FALSE(fs::exists(fs::symlink_status(made[i])));
  }
  for (int i = 3; i < 13; ++i) CHECK_MESSAGE(fs::exists(made[i] / "history.jsonl"), made[i]);  // "-10" after "-9"
  CHECK(fs::exists(new_run / "checkpoints" / "last.pt"));
  CHECK(fs::exists(earlier / "20000101-000000" / "notes.txt"));
  CHECK(fs::is_symlink(earlier / "20000101-000001"));
  CHECK(fs::exists(earlier / "20000101-000002-x" / ".torchhost-attempt"));
  CHECK(fs::exists(outside / "precious.txt"));
  CHECK(fs::exists(outside / ".torchhost-attempt"));
  CHECK(tp::prune_earlier_attempts(run).removed.empty());  // bounded: a second call finds 10
  fs::remove_all(root);
}
