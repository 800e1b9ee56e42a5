// Exact resume: a run stopped by SIGTERM (or SIGUSR1, SIGUSR2, SIGHUP) in the middle of an epoch
// saves its position, exits with 128 + signal (143 for SIGTERM), and `--resume auto` finishes with
// weights bitwise equal to an uninterrupted run (dropout makes the CPU RNG state part of what must
// be restored).
#include <ATen/ATen.h>

#include <csignal>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/error.h"

#include "history_reader.h"
#include "host_runner.h"

#include <doctest/doctest.h>

namespace {

const std::string kResumeArgs =
    "--config tests/integration/accumulation.toml --set progress.mode=\"off\" --set run.threads=1 "
    "--set train.batch_size=16 --set train.log_every_steps=5 --set model.dropout=0.2 --set data.num_workers=2 "
    "--set optim.lr=0.01 ";

/// Every regular file under `dir` (relative name) with its modification time and bytes: a file
/// rewritten with the same text still differs.
std::map<std::string, std::string> files_of(const std::filesystem::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir))
    if (entry.is_regular_file())
      files[entry.path().lexically_relative(dir).string()] =
          std::to_string(entry.last_write_time().time_since_epoch().count()) + " " + tp::test::read_text(entry.path());
  return files;
}

}  // namespace

TEST_CASE("SIGTERM mid-epoch saves the position; --resume auto continues bitwise-exactly") {
  const auto straight_dir = tp::test::fresh_dir("resume_straight");
  const auto straight = tp::test::run_host(kResumeArgs + "--output-dir '" + straight_dir.string() + "'");
  INFO(straight.output);
  REQUIRE(straight.exit_code == 0);

  // Start a second run, wait until it has logged a few steps, then send SIGTERM.
  const auto dir = tp::test::fresh_dir("resume_interrupted");
  const auto interrupted =
      tp::test::run_host_until_history(kResumeArgs + "--output-dir '" + dir.string() + "'", dir / "history.jsonl", 6);
  INFO(interrupted.output);
  CHECK(interrupted.output.find("exit=143") != std::string::npos);
  CHECK(interrupted.output.find("--resume auto") != std::string::npos);
  const tp::LoadedCheckpoint saved = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(saved.step >= 30);
  CHECK(saved.step < 2 * 128);
  // The stop and its save are in train.log too (ops trial, finding 8: only stderr had them).
  CHECK(tp::test::contains(tp::test::read_text(dir / "train.log"),
                           "stop: stopped by signal 15 at step " + std::to_string(saved.step) + "; saved "));

  const auto resumed = tp::test::run_host(kResumeArgs + "--output-dir '" + dir.string() + "' --resume auto");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.output.find("resumed at epoch") != std::string::npos);

  const auto a = tp::load_checkpoint(straight_dir / "checkpoints" / "last.pt");
  const auto b = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(a.step == b.step);
  REQUIRE(a.model.size() == b.model.size());
  for (std::size_t i = 0; i < a.model.size(); ++i) {
    INFO(a.model[i].first);
    CHECK(at::equal(a.model[i].second, b.model[i].second));
  }
  // The history has each epoch once, as if the run had never stopped.
  const std::string text = tp::test::read_text(dir / "history.jsonl");
  std::size_t epochs = 0;
  for (std::size_t at = 0; (at = text.find("\"kind\":\"epoch\"", at)) != std::string::npos; ++at) ++epochs;
  CHECK(epochs == 2);
  // Every record equal, measurements aside.
  const auto resumed_rows = tp::test::without_timings(dir);
  const auto straight_rows = tp::test::without_timings(straight_dir);
  CHECK(resumed_rows.size() == straight_rows.size());
  CHECK(resumed_rows == straight_rows);
}

// Ops trial, finding 3: `#SBATCH --signal=USR1@90` (SLURM's warning before a time limit or a
// preemption) killed the host by SIGUSR1's default action, saving nothing.
TEST_CASE("SIGUSR1 stops as SIGTERM does: saves the position, exits 138, says so in train.log") {
  const auto dir = tp::test::fresh_dir("resume_usr1");
  const auto stopped = tp::test::run_host_until_history(
      kResumeArgs + "--set train.epochs=1 --output-dir '" + dir.string() + "'", dir / "history.jsonl", 3, "USR1");
  INFO(stopped.output);
  CHECK(tp::test::contains(stopped.output, "exit=138"));
  const tp::LoadedCheckpoint saved = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(saved.step >= 15);
  CHECK(saved.step < 128);
  CHECK(saved.batch == saved.step); // inside the first epoch, where it stopped
  CHECK(tp::test::contains(tp::test::read_text(dir / "train.log"),
                           "stop: stopped by signal 10 at step " + std::to_string(saved.step)));
}

// Soak trial F1: SIGHUP (a job's ssh, tmux or login session died) and SIGUSR2 (a site's
// `--signal=USR2`) killed the run by their default action, unsaved and unlogged (exit 129/140).
// The hang-up's run writes to /dev/full, as one whose terminal went away cannot write: it saves all
// the same, and its resume ends bitwise equal to a straight run.
TEST_CASE("SIGHUP and SIGUSR2 stop as SIGTERM does: save the position, exit 129/140, say so in train.log") {
  const std::string one_epoch = kResumeArgs + "--set train.epochs=1 --output-dir '";
  for (const auto& [name, number] : {std::pair<std::string, int>{"HUP", SIGHUP}, {"USR2", SIGUSR2}}) {
    INFO(name);
    const auto dir = tp::test::fresh_dir("resume_" + name);
    const std::string unwritable = name == "HUP" ? " > /dev/full 2>&1" : "";
    const auto stopped =
        tp::test::run_host_until_history(one_epoch + dir.string() + "'" + unwritable, dir / "history.jsonl", 3, name);
    INFO(stopped.output);
    CHECK(tp::test::contains(stopped.output, "exit=" + std::to_string(128 + number)));
    const tp::LoadedCheckpoint saved = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
    CHECK(saved.step >= 15);
    CHECK(saved.batch == saved.step); // inside the first epoch, where it stopped
    CHECK(tp::test::contains(tp::test::read_text(dir / "train.log"), "stop: stopped by signal " + std::to_string(number) +
                                                                         " at step " + std::to_string(saved.step) + "; saved "));
    if (name != "HUP") continue;
    const auto resumed = tp::test::run_host(one_epoch + dir.string() + "' --resume auto");
    INFO(resumed.output);
    REQUIRE(resumed.exit_code == 0);
    const auto straight_dir = tp::test::fresh_dir("resume_HUP_straight");
    REQUIRE(tp::test::run_host(one_epoch + straight_dir.string() + "'").exit_code == 0);
    const auto a = tp::load_checkpoint(straight_dir / "checkpoints" / "last.pt");
    const auto b = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
    CHECK(a.step == b.step);
    REQUIRE(a.model.size() == b.model.size());
    for (std::size_t i = 0; i < a.model.size(); ++i) CHECK(at::equal(a.model[i].second, b.model[i].second));
    CHECK(tp::test::without_timings(dir) == tp::test::without_timings(straight_dir));
  }
}

TEST_CASE("--resume auto without a checkpoint starts fresh; a damaged checkpoint is refused clearly") {
  const auto dir = tp::test::fresh_dir("resume_fresh");
  const auto fresh = tp::test::run_host(kResumeArgs + "--set train.epochs=1 --output-dir '" + dir.string() + "' --resume auto");
  INFO(fresh.output);
  CHECK(fresh.exit_code == 0);
  CHECK(fresh.output.find("starting fresh") != std::string::npos);

  const auto bad = dir / "truncated.pt";
  const std::string bytes = tp::test::read_text(dir / "checkpoints" / "last.pt");
  std::ofstream(bad, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  const auto refused = tp::test::run_host(kResumeArgs + "--output-dir '" + dir.string() + "' --resume '" + bad.string() + "'");
  INFO(refused.output);
  CHECK(refused.exit_code == tp::kExitCheckpoint);
  CHECK(refused.output.find("truncated.pt") != std::string::npos);
  CHECK(refused.output.find("damaged") != std::string::npos);
}

// The cluster trial's F5: the saved batch index counts batches of the saved size, so a resume
// inside an epoch with another batch size skipped or repeated samples, or failed in the loader
// ("start_batch 12 is outside [0, 7]"), after a mere warning.
TEST_CASE("a resume inside an epoch with another train.batch_size is refused, naming the position") {
  const auto dir = tp::test::fresh_dir("resume_mid_epoch_batch");
  const std::string args = kResumeArgs + "--set train.epochs=1 --set checkpoint.strategy=\"steps\" "
                                         "--set checkpoint.every=32 --set checkpoint.keep_last=10 --output-dir '" +
                           dir.string() + "'";
  const auto trained = tp::test::run_host(args);
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const auto inside = dir / "checkpoints" / "step-00000032.pt"; // 32 of the epoch's 128 batches
  REQUIRE(std::filesystem::exists(inside));
  REQUIRE(tp::load_checkpoint(inside).batch == 32);
  const auto refused = tp::test::run_host(args + " --resume '" + inside.string() + "' --set train.batch_size=8");
  INFO(refused.output);
  CHECK(refused.exit_code == 2);
  CHECK(refused.output.find("train.batch_size: 16 -> 8 since the checkpoint, which stopped inside epoch 1 after 32 "
                            "batch(es)") != std::string::npos);
}

// Issue 58, item 6: a --resume that failed at start-up (another model, a batch larger than the
// data) rewrote config.toml and runtime.toml with the rejected settings, which predict, eval,
// compare and mlflow-sync then read as the run's; `host eval` rewrote runtime.toml too.
TEST_CASE("a --resume that fails at start-up, and host eval, leave config.toml and runtime.toml as trained") {
  const auto dir = tp::test::fresh_dir("resume_refused_keeps_config");
  const std::string args =
      kResumeArgs + "--set train.epochs=1 --set data.val_from_train=true --set checkpoint.strategy=\"steps\" "
                    "--set checkpoint.every=64 --set checkpoint.keep_last=2 --output-dir '" + dir.string() + "'";
  const auto trained = tp::test::run_host(args);
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const std::string config = tp::test::read_text(dir / "config.toml");
  const std::string runtime = tp::test::read_text(dir / "runtime.toml");
  REQUIRE(runtime.find("world_size = 1") != std::string::npos);
  for (const std::string set : {"--set 'model.hidden=[32]'", "--set train.batch_size=100000"}) {
    const auto refused = tp::test::run_host(args + " --resume auto " + set);
    INFO(set, ": ", refused.output);
    CHECK(refused.exit_code != 0);
    CHECK(tp::test::read_text(dir / "config.toml") == config);
    CHECK(tp::test::read_text(dir / "runtime.toml") == runtime);
  }
  // Settings the checkpoint's optimizer and schedule hold would be recorded and not used (a trial's
  // resume said lr 0.01 and trained at 0.003): refused by name, exit 2; the kernels' choice passes.
  const auto ignored = tp::test::run_host(args + " --resume auto --set optim.lr=0.02 --set schedule.warmup_steps=5 "
                                                 "--set optim.implementation=\"for_loop\"");
  INFO(ignored.output);
  CHECK(ignored.exit_code == 2);
  CHECK(ignored.output.find("optim.lr: 0.01 -> 0.02; schedule.warmup_steps: 10 -> 5 since") !=
        std::string::npos);
  CHECK(ignored.output.find("--set train.init_weights=") != std::string::npos);
  CHECK(ignored.output.find("optim.implementation") == std::string::npos);
  CHECK(tp::test::read_text(dir / "config.toml") == config);
  // host eval adds its eval_last.json and changes nothing else of the run (issue 61: it writes no
  // file of the training's, not even the same text again).
  const auto before = files_of(dir);
  const auto eval = tp::test::run_host("eval --config '" + (dir / "config.toml").string() + "' --output-dir '" +
                                       dir.string() + "' --checkpoint last --set run.threads=2");
  INFO(eval.output);
  CHECK(eval.exit_code == 0);
  CHECK(tp::test::read_text(dir / "runtime.toml") == runtime);
  auto after = files_of(dir);
  CHECK(after.erase("eval_last.json") == 1);
  CHECK(after == before);
  // A resume that trains (from the middle) writes both, with its own settings.
  const auto resumed = tp::test::run_host(args + " --set train.log_every_steps=7 --resume '" +
                                          (dir / "checkpoints" / "step-00000064.pt").string() + "'");
  INFO(resumed.output);
  CHECK(resumed.exit_code == 0);
  CHECK(tp::test::read_text(dir / "config.toml").find("log_every_steps = 7") != std::string::npos);
  CHECK(tp::test::read_text(dir / "runtime.toml").find("world_size = 1") != std::string::npos);
}

TEST_CASE("a second host train into a run directory in use is refused, naming the holder; the first finishes") {
  const auto dir = tp::test::fresh_dir("run_lock");
  const std::string args = "--config configs/quickstart.toml --output-dir '" + dir.string() +
                           "' --set train.epochs=1 --set data.train.size=3000 --set progress.mode=\"off\"";
  // The second starts once the first has written its first history line, while it trains.
  const std::string host = "'" + std::string(tp::test::build_dir()) + "/bin/host' ";
  const auto both = tp::test::run_shell(
      host + args + " > '" + (dir.parent_path() / "run_lock_first.out").string() + "' 2>&1 & first=$!; " +
      "for i in $(seq 1 3000); do [ -s '" + (dir / "history.jsonl").string() + "' ] && break; sleep 0.02; done; " +
      host + args + "; echo \"second=$?\"; wait $first; echo \"first=$?\"");
  INFO(both.output);
  CHECK(both.output.find("second=2") != std::string::npos);
  CHECK(both.output.find("another training is running in " + dir.string() + " (pid ") != std::string::npos);
  CHECK(both.output.find("first=0") != std::string::npos);
  // Each step once: the history holds the first run's epoch only (before the lock, both appended
  // their steps, each twice in all).
  const std::string history = tp::test::read_text(dir / "history.jsonl");
  std::size_t epochs = 0;
  for (std::size_t at = history.find("\"kind\":\"epoch\""); at != std::string::npos;
       at = history.find("\"kind\":\"epoch\"", at + 1))
    ++epochs;
  CHECK(epochs == 1);
  // Once the first has exited, the directory is free again (its run.lock stays, unlocked).
  const auto again = tp::test::run_host(args + " --resume auto");
  INFO(again.output);
  CHECK(again.exit_code == 0);
}

// Ops trial, finding 1: a step save at an epoch's last step records the position before the
// epoch's end (its evaluation and its record). A requeued finished run ended that epoch again
// (epoch records at steps 30, 60, 90, 90, 90, 90 after three requeues), and a kill between the
// epoch record and the next save left the record twice after the resume.
TEST_CASE("step saves at an epoch's end: a requeued finished run appends nothing; a resume from one writes each record once") {
  // 256 samples of 16: 16 steps an epoch, saves at 8, 16 (epoch 1's last step), 24 and 32.
  const std::string args = kResumeArgs +
                           "--set data.train.size=256 --set data.val_from_train=true --set checkpoint.strategy=\"steps\" "
                           "--set checkpoint.every=8 --set checkpoint.keep_last=4 ";
  const auto dir = tp::test::fresh_dir("resume_epoch_end_steps");
  const auto trained = tp::test::run_host(args + "--output-dir '" + dir.string() + "'");
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const tp::LoadedCheckpoint last = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(last.epoch == 2); // past the last epoch's end: nothing is left to run
  CHECK(last.batch == 0);
  const std::string history = tp::test::read_text(dir / "history.jsonl");
  const auto straight_rows = tp::test::without_timings(dir);

  // The run's record as it trained: a requeue, even one with other settings (the second here), trains
  // nothing and rewrites none of it (before, config.toml took the new settings and report.toml the
  // idle process's numbers).
  const std::string config = tp::test::read_text(dir / "config.toml");
  const std::string runtime = tp::test::read_text(dir / "runtime.toml");
  const std::string report = tp::test::read_text(dir / "report.toml");
  for (const std::string& sets : {std::string(), std::string("--set run.threads=2 --set train.log_every_steps=7 ")}) {
    const auto again = tp::test::run_host(args + sets + "--output-dir '" + dir.string() + "' --resume auto");
    INFO(again.output);
    CHECK(again.exit_code == 0);
    CHECK(again.output.find("the run had finished; nothing to train") != std::string::npos);
    CHECK(tp::test::read_text(dir / "history.jsonl") == history);
    CHECK(tp::test::read_text(dir / "config.toml") == config);
    CHECK(tp::test::read_text(dir / "runtime.toml") == runtime);
    CHECK(tp::test::read_text(dir / "report.toml") == report);
  }

  // The save at step 16 stands before epoch 1's end; the history after it goes on to step 32.
  const auto epoch_end = tp::load_checkpoint(dir / "checkpoints" / "step-00000016.pt");
  REQUIRE(epoch_end.step == 16);
  CHECK(epoch_end.batch == 16);
  const auto rewound = tp::test::run_host(args + "--output-dir '" + dir.string() + "' --resume '" +
                                          (dir / "checkpoints" / "step-00000016.pt").string() + "'");
  INFO(rewound.output);
  REQUIRE(rewound.exit_code == 0);
  const auto rewound_rows = tp::test::without_timings(dir);
  CHECK(rewound_rows.size() == straight_rows.size());
  CHECK(rewound_rows == straight_rows);
}

// Ops trial, finding 11: a run directory whose lock cannot be opened (a read-only file system, a
// lock file of another user) gave exit 1 on --resume, where a directory that cannot be created
// gives 2. A directory in run.lock's place stands in for both here (EISDIR; the read-only bind
// mount was checked by hand: the same message with "Read-only file system").
TEST_CASE("a run directory whose lock cannot be opened is a configuration error (exit 2), fresh or resumed") {
  const auto dir = tp::test::fresh_dir("resume_unlockable");
  std::filesystem::create_directories(dir / "run.lock");
  for (const std::string resume : {"", " --resume auto"}) {
    const auto run = tp::test::run_host(kResumeArgs + "--set train.epochs=1 --output-dir '" + dir.string() + "'" + resume);
    INFO(run.output);
    CHECK(run.exit_code == tp::kExitConfig);
    CHECK(tp::test::contains(run.output, "cannot use " + dir.string() + " as the run directory: cannot open the lock file"));
    CHECK_FALSE(std::filesystem::exists(dir / "config.toml"));
  }
}
