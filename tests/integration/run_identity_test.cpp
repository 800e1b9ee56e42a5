// Run identity (docs/run_directory.md, "Run identity"; issue 41, item 9): a fresh `host train` into
// a directory that holds another run's checkpoints is refused, and `--new-run` sets that run aside
// whole; every checkpoint carries its run's identity, `--resume auto` passes over another run's
// files, and `--resume FILE` continues the run that saved FILE, saying so.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h"

#include "history_reader.h"
#include "host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;
using tp::test::contains;

// 256 samples in batches of 32: 8 optimizer steps per epoch, a checkpoint every 2.
std::string identity_run(const fs::path& dir, int epochs) {
  return "--config tests/integration/c_regression.toml --plugin-dir '" + std::string(tp::test::fixture_plugin_dir()) +
         "' --output-dir '" + dir.string() + "' --set progress.mode=\"off\" --set train.epochs=" + std::to_string(epochs) +
         " --set checkpoint.strategy=\"steps\" --set checkpoint.every=2 --set checkpoint.keep_last=2 ";
}

void write_identity_file(const fs::path& file, const std::string& text) { std::ofstream(file) << text; }

std::string recorded_id(const fs::path& dir) {
  std::string text = tp::test::read_text(dir / "run.id");
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

}  // namespace

TEST_CASE("a fresh run into a directory with another run's checkpoints is refused; --new-run sets that run aside") {
  const auto dir = tp::test::fresh_dir("identity_new_run");
  const auto first = tp::test::run_host(identity_run(dir, 2));
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  const std::string first_id = recorded_id(dir);
  CHECK(first_id.size() == 32);
  CHECK(tp::load_checkpoint(dir / "checkpoints" / "last.pt").run_id == first_id);
  const std::string first_last = tp::test::read_text(dir / "checkpoints" / "last.pt");
  const std::string first_history = tp::test::read_text(dir / "history.jsonl");

  // Before: it trained, keep_last evicted its own newer-numbered files and --resume auto found the other's.
  const auto refused = tp::test::run_host(identity_run(dir, 1));
  INFO(refused.output);
  CHECK(refused.exit_code == 2);
  CHECK(contains(refused.output, "holds an earlier run's checkpoints"));
  CHECK(contains(refused.output, "--resume auto"));
  CHECK(contains(refused.output, "--new-run"));
  CHECK(tp::test::read_text(dir / "checkpoints" / "last.pt") == first_last);
  CHECK(tp::test::read_text(dir / "history.jsonl") == first_history);
  CHECK(recorded_id(dir) == first_id);

  const auto both = tp::test::run_host(identity_run(dir, 1) + "--new-run --resume auto");
  INFO(both.output);
  CHECK(both.exit_code == 2);

  const auto second = tp::test::run_host(identity_run(dir, 1) + "--new-run");
  INFO(second.output);
  REQUIRE(second.exit_code == 0);
  CHECK(contains(second.output, "--new-run: the earlier run's files are now in"));
  std::vector<fs::path> earlier;
  for (const auto& entry : fs::directory_iterator(dir / "earlier")) earlier.push_back(entry.path());
  REQUIRE(earlier.size() == 1);
  CHECK(tp::test::read_text(earlier[0] / "checkpoints" / "last.pt") == first_last);
  CHECK(tp::test::read_text(earlier[0] / "history.jsonl") == first_history);
  CHECK(recorded_id(earlier[0]) == first_id);
  CHECK(fs::exists(earlier[0] / "train.log"));
  const std::string second_id = recorded_id(dir);
  CHECK(second_id.size() == 32);
  CHECK(second_id != first_id);
  CHECK(tp::load_checkpoint(dir / "checkpoints" / "last.pt").run_id == second_id);
  CHECK(tp::test::rows_of(tp::test::read_history(dir), "epoch").size() == 1); // its own history only
}

TEST_CASE("--resume auto passes over another run's checkpoints; --resume FILE continues the run that saved it") {
  const auto other_dir = tp::test::fresh_dir("identity_other");
  const auto other = tp::test::run_host(identity_run(other_dir, 2));
  INFO(other.output);
  REQUIRE(other.exit_code == 0);
  const std::string other_id = recorded_id(other_dir);
  const fs::path other_last = other_dir / "checkpoints" / "last.pt";

  // Another run's last.pt copied over this run's: the newest name is not this run's to resume.
  const auto dir = tp::test::fresh_dir("identity_mixed");
  const auto own = tp::test::run_host(identity_run(dir, 1));
  INFO(own.output);
  REQUIRE(own.exit_code == 0);
  const std::string own_id = recorded_id(dir);
  // Removed first: last.pt is a hard link of the newest step file (one save, several names).
  fs::remove(dir / "checkpoints" / "last.pt");
  fs::copy_file(other_last, dir / "checkpoints" / "last.pt");
  const auto resumed = tp::test::run_host(identity_run(dir, 2) + "--resume auto");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(contains(resumed.output, "passing over " + (dir / "checkpoints" / "last.pt").string() + ": it was saved by run " +
                                     other_id + ", not by this directory's run " + own_id));
  CHECK(contains(resumed.output, "the newest checkpoint of this run (1 name(s) of another run passed over)"));
  CHECK(contains(resumed.output, ", step 8\n"));
  const tp::LoadedCheckpoint last = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(last.run_id == own_id);
  CHECK(last.step == 16);
  CHECK(recorded_id(dir) == own_id);

  // Only another run's checkpoint: nothing to continue, and nothing trained.
  const auto lone = tp::test::fresh_dir("identity_foreign");
  fs::create_directories(lone / "checkpoints");
  fs::copy_file(other_last, lone / "checkpoints" / "last.pt");
  write_identity_file(lone / "run.id", own_id + "\n");
  const auto foreign = tp::test::run_host(identity_run(lone, 3) + "--resume auto");
  INFO(foreign.output);
  CHECK(foreign.exit_code == 2);
  CHECK(contains(foreign.output, "was saved by another run than the one this directory holds"));
  CHECK_FALSE(fs::exists(lone / "history.jsonl"));

  // Named explicitly, it is continued, as the run that saved it, where the directory holds no
  // checkpoint of its own run (one that does is refused: the next case).
  fs::remove_all(lone / "checkpoints");
  const auto named = tp::test::run_host(identity_run(lone, 3) + "--resume '" + other_last.string() + "'");
  INFO(named.output);
  REQUIRE(named.exit_code == 0);
  CHECK(contains(named.output, "now continues run " + other_id));
  CHECK(recorded_id(lone) == other_id);
  CHECK(tp::load_checkpoint(lone / "checkpoints" / "last.pt").run_id == other_id);

  // A run.id that is not an identity stops the run before anything is written.
  write_identity_file(lone / "run.id", "not an identity\n");
  const auto garbled = tp::test::run_host(identity_run(lone, 4) + "--resume auto");
  INFO(garbled.output);
  CHECK(garbled.exit_code == 2);
  CHECK(contains(garbled.output, (lone / "run.id").string()));
}

// Ops trial, finding 13, and what it missed: with links planted in a fresh run directory, the run
// was refused for run.id "with nothing written" after config.toml's link had been replaced, and
// its first log line had gone through the train.log link into the file it pointed at.
TEST_CASE("links planted in a run directory: refused with nothing written, the files they point at untouched") {
  const auto victim = tp::test::fresh_dir("planted_victim");
  for (const char* name : {"config.toml", "train.log", "run.id"}) std::ofstream(victim / name) << "victim " << name;
  const auto dir = tp::test::fresh_dir("planted_links");
  for (const char* name : {"config.toml", "train.log", "run.id"}) fs::create_symlink(victim / name, dir / name);
  const auto with_id = tp::test::run_host(identity_run(dir, 1));
  INFO(with_id.output);
  CHECK(with_id.exit_code == 2);
  CHECK(contains(with_id.output, "run.id should hold the identity"));
  CHECK(fs::is_symlink(dir / "config.toml")); // nothing was written: not even the link replaced
  CHECK(fs::is_symlink(dir / "train.log"));

  // Without the run.id link, the train.log link itself is refused.
  fs::remove(dir / "run.id");
  const auto with_log = tp::test::run_host(identity_run(dir, 1));
  INFO(with_log.output);
  CHECK(with_log.exit_code == 2);
  CHECK(contains(with_log.output, (dir / "train.log").string() + " is a symbolic link"));
  CHECK(fs::is_symlink(dir / "config.toml"));
  for (const char* name : {"config.toml", "train.log", "run.id"})
    CHECK(tp::test::read_text(victim / name) == std::string("victim ") + name);
}

// A fine-tuning trial killed a run before its first save and resumed it: --resume auto found no
// checkpoint and started fresh, appending to the dead attempt's history (43 lines for 32).
TEST_CASE("an attempt stopped before its first save: the fresh start sets its files aside, its own history alone") {
  const fs::path dir = tp::test::fresh_dir("identity_no_save");
  // What a killed first attempt leaves: records, a log, a config, no checkpoint.
  fs::create_directories(dir);
  const std::string dead = "{\"kind\":\"step\",\"step\":1,\"train/loss\":9}\n{\"kind\":\"step\",\"step\":2,\"train/loss\":8}\n";
  std::ofstream(dir / "history.jsonl") << dead;
  std::ofstream(dir / "train.log") << "the first attempt's log\n";
  for (const std::string resume : {"--resume auto", ""}) {
    // The second round finds a finished run (its report.toml) whose checkpoints were removed: set
    // aside as well, but as a run, never as an attempt that pruning may delete (review of soak F5).
    const bool finished_before = fs::exists(dir / "report.toml");
    const auto run = tp::test::run_host(identity_run(dir, 1) + resume);
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(contains(run.output, finished_before ? "held an earlier run's history and report but no checkpoint"
                                               : "held an earlier attempt's history but no checkpoint"));
    // Only this run's records: its one epoch, none of the dead attempt's.
    CHECK(tp::test::rows_of(tp::test::read_history(dir), "epoch").size() == 1);
    CHECK(tp::test::read_text(dir / "history.jsonl").find("\"train/loss\":9}") == std::string::npos);
    std::vector<fs::path> earlier;
    for (const auto& entry : fs::directory_iterator(dir / "earlier")) earlier.push_back(entry.path());
    REQUIRE(!earlier.empty());
    std::size_t marked = 0;
    for (const fs::path& set_aside : earlier) marked += fs::is_regular_file(set_aside / ".torchhost-attempt") ? 1 : 0;
    CHECK(marked == 1);  // the killed attempt only
    if (resume.empty()) break;
    REQUIRE(earlier.size() == 1);
    CHECK(tp::test::read_text(earlier[0] / "history.jsonl") == dead);
    CHECK(tp::test::read_text(earlier[0] / "train.log") == "the first attempt's log\n");
    // The second round: a directory with this run's checkpoints is no abandoned attempt; remove
    // them to play another crash before the first save, now started without --resume.
    fs::remove_all(dir / "checkpoints");
  }
}

// Security trial F10: `--resume FILE` of another run into a directory holding a finished run
// replaced that run's last.pt and cut its history to the checkpoint's step, with one warning.
// Before the fix the resume below trained (exit 0) and this case failed on every check after it.
TEST_CASE("--resume FILE of another run into a directory holding a run is refused, nothing written") {
  const auto other_dir = tp::test::fresh_dir("identity_resume_other");
  const auto other = tp::test::run_host(identity_run(other_dir, 1));
  INFO(other.output);
  REQUIRE(other.exit_code == 0);
  const fs::path other_last = other_dir / "checkpoints" / "last.pt";
  const auto dir = tp::test::fresh_dir("identity_resume_finished");
  const auto finished = tp::test::run_host(identity_run(dir, 2));
  INFO(finished.output);
  REQUIRE(finished.exit_code == 0);
  const std::string id = recorded_id(dir), last = tp::test::read_text(dir / "checkpoints" / "last.pt");
  const std::string history = tp::test::read_text(dir / "history.jsonl"), log = tp::test::read_text(dir / "train.log");

  const auto refused = tp::test::run_host(identity_run(dir, 2) + "--resume '" + other_last.string() + "'");
  INFO(refused.output);
  CHECK(refused.exit_code == 2);
  CHECK(contains(refused.output, "was saved by run " + recorded_id(other_dir)));
  CHECK(contains(refused.output, "holds the checkpoints of another run"));
  CHECK(contains(refused.output, "nothing was written"));
  CHECK(tp::test::read_text(dir / "checkpoints" / "last.pt") == last);
  CHECK(tp::test::read_text(dir / "history.jsonl") == history);
  CHECK(tp::test::read_text(dir / "train.log") == log);
  CHECK(recorded_id(dir) == id);

  // The directory's own checkpoint, named as a file, is a resume of its own run, as before.
  const auto own = tp::test::run_host(identity_run(dir, 3) + "--resume '" + (dir / "checkpoints" / "last.pt").string() + "'");
  INFO(own.output);
  CHECK(own.exit_code == 0);
  CHECK(recorded_id(dir) == id);
}

// Security trial F6: directory links planted in a run directory (checkpoints/, plots/,
// tensorboard/, earlier/) were followed: the run's checkpoints, plots and events, and --new-run's
// earlier run, went into the planter's directory, exit 0 without a word. Before the fix this case
// failed at its first check (exit 0, last.pt in the link's target).
TEST_CASE("directory links planted in a run directory are refused, nothing written through them") {
  const auto victim = tp::test::fresh_dir("planted_dir_victim");
  const auto dir = tp::test::fresh_dir("planted_dirs");
  for (const char* name : {"checkpoints", "plots", "tensorboard"}) {
    fs::create_directories(victim / name);
    std::ofstream(victim / name / "important.txt") << "important";
    fs::create_directory_symlink(victim / name, dir / name);
    const auto planted = tp::test::run_host(identity_run(dir, 1) + "--set logging.tensorboard=true");
    INFO(planted.output);
    CHECK(planted.exit_code == 2);
    CHECK(contains(planted.output, (dir / name).string() + " is a symbolic link (to " + (victim / name).string() + ")"));
    CHECK(contains(planted.output, "Remove the link"));
    CHECK(std::distance(fs::directory_iterator(victim / name), fs::directory_iterator()) == 1);
    CHECK_FALSE(fs::exists(dir / "train.log"));
    fs::remove(dir / name);
  }

  // --new-run's earlier/: the earlier run is not moved into the link's target.
  const auto first = tp::test::run_host(identity_run(dir, 1));
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  fs::create_directories(victim / "earlier");
  fs::create_directory_symlink(victim / "earlier", dir / "earlier");
  const auto moved = tp::test::run_host(identity_run(dir, 1) + "--new-run");
  INFO(moved.output);
  CHECK(moved.exit_code == 2);
  CHECK(contains(moved.output, (dir / "earlier").string() + " is a symbolic link"));
  CHECK(fs::is_empty(victim / "earlier"));
  CHECK(fs::exists(dir / "checkpoints" / "last.pt"));
}

// The same trial: a run directory every user may write was used without a word.
TEST_CASE("a run directory every user may write is warned of") {
  const auto dir = tp::test::fresh_dir("world_writable");
  fs::permissions(dir, fs::perms::all);
  const auto run = tp::test::run_host(identity_run(dir, 1) + "--set train.max_steps=2");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(contains(run.output, "may be written by every user (mode 0777)"));
  CHECK(contains(run.output, "chmod o-w"));
}

// Security trial F18, F20: a FIFO planted as train.log or history.jsonl hung `host train` in
// open(), deaf to SIGTERM and holding run.lock; a train.log another user made beforehand in a
// shared run directory was appended to, so that user could read the whole log.
TEST_CASE("a FIFO or another user's file as train.log or history.jsonl is refused at once, nothing written") {
  const auto dir = tp::test::fresh_dir("planted_append_files");
  const std::string timed = "timeout -k 5 60 '" + std::string(tp::test::build_dir()) + "/bin/host' ";
  for (const char* name : {"train.log", "history.jsonl"}) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    REQUIRE(::mkfifo((dir / name).c_str(), 0666) == 0);
    const auto planted = tp::test::run_shell(timed + identity_run(dir, 1));
    INFO(name, ": ", planted.output);
    CHECK(planted.exit_code == 2);
    CHECK(contains(planted.output, (dir / name).string() + " is a FIFO, not a regular file"));
    CHECK_FALSE(fs::exists(dir / "checkpoints" / "last.pt"));
  }
  if (::geteuid() != 0) return;  // making a file another user's needs root
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "train.log") << "";
  REQUIRE(::chown((dir / "train.log").c_str(), 65534, 65534) == 0);
  const auto foreign = tp::test::run_shell(timed + identity_run(dir, 1));
  INFO(foreign.output);
  CHECK(foreign.exit_code == 2);
  CHECK(contains(foreign.output, (dir / "train.log").string() + " belongs to uid 65534, not to you"));
  CHECK(tp::test::read_text(dir / "train.log").empty());
}
