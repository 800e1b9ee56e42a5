// A full disk while the host writes: the host runs under a file-size limit (RLIMIT_FSIZE, set
// with `prlimit --fsize` as `ulimit -f` sets it; SIGXFSZ is ignored, so write() fails with EFBIG as
// on a full disk instead of the signal killing the process). A checkpoint save, a history.jsonl
// append, a prediction file and sweep.toml that hit the limit must each fail with a message naming
// the file, the OS error and what is intact, exit 1, leave no temporary and no half record, and
// leave the previous checkpoint loadable.
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/report/history_line.h"

#include "integration/host_runner.h"
#include "support/run_files.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

const std::string kDiskFullArgs =
    "--config tests/integration/accumulation.toml --set progress.mode=\"off\" --set run.threads=1 "
    "--set checkpoint.strategy=\"steps\" --set checkpoint.every=50 --set checkpoint.keep_last=3 ";

using tp::test::contains;

// The start of a shell command that runs `host` with files limited to `bytes` (prlimit counts
// bytes; the shells' `ulimit -f` counts 1024- or 512-byte blocks, dash's being 512).
std::string limited(std::size_t bytes) {
  return "trap '' XFSZ; exec prlimit --fsize=" + std::to_string(bytes) + " '" + tp::test::build_dir() + "/bin/host' ";
}

}  // namespace

TEST_CASE("a checkpoint write that hits the size limit fails clearly and keeps the previous one") {
  // Saves at steps 50, 100 and 128 (the end). The limited run resumes from step 100, so its one
  // save (step 128) must replace last.pt, and cannot.
  const auto dir = tp::test::fresh_dir("crash_disk_full");
  const auto ckpt = dir / "checkpoints";
  const std::string args = kDiskFullArgs + "--output-dir '" + dir.string() + "' ";
  const auto first = tp::test::run_host(args);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  const auto size = std::filesystem::file_size(ckpt / "last.pt");
  const std::string before = tp::test::read_text(ckpt / "last.pt");
  REQUIRE(size > 64 * 1024);

  // Half a checkpoint fits under the limit; the logs and history stay far below it.
  const auto full =
      tp::test::run_shell(limited(size / 2) + args + "--resume '" + (ckpt / "step-00000100.pt").string() + "'");
  INFO(full.output);
  CHECK(full.exit_code == 1);
  CHECK(contains(full.output, "saving the checkpoint of step 128 (last.pt, step-00000128.pt) in " + ckpt.string()));
  CHECK(contains(full.output, "File too large"));
  CHECK(contains(full.output, "disk quota full"));
  CHECK(contains(full.output, "intact"));

  // The previous checkpoint is byte-for-byte what it was, loads, and no temporary is left.
  CHECK(tp::test::read_text(ckpt / "last.pt") == before);
  CHECK(tp::load_checkpoint(ckpt / "last.pt").step == 128);
  CHECK(tp::load_checkpoint(ckpt / "step-00000100.pt").step == 100);
  for (const auto& entry : std::filesystem::directory_iterator(ckpt))
    CHECK_MESSAGE(!entry.path().filename().string().starts_with("."), "left behind: " << entry.path());

  // With space again, the run resumes from the intact last.pt.
  const auto again = tp::test::run_host(args + "--resume auto");
  INFO(again.output);
  CHECK(again.exit_code == 0);
  CHECK(contains(again.output, "resumed at"));
}

TEST_CASE("a history.jsonl append that hits the size limit fails clearly, cuts its half line, keeps the checkpoints") {
  // One history line per step (128 steps), TensorBoard on. The limited run resumes from step 100:
  // the resume rewrites history.jsonl to its first 100 steps, and the appends of the steps after
  // reach the limit, set halfway between that size and the finished run's, before the save at 128.
  const auto dir = tp::test::fresh_dir("crash_disk_full_history");
  const auto ckpt = dir / "checkpoints";
  const auto history = dir / "history.jsonl";
  const std::string args = kDiskFullArgs + "--set train.log_every_steps=1 --set logging.tensorboard=true --output-dir '" +
                           dir.string() + "' ";
  const auto first = tp::test::run_host(args);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  const std::string finished = tp::test::read_text(history);
  std::size_t through_100 = 0; // bytes of the records up to step 100
  for (std::size_t begin = 0, end; (end = finished.find('\n', begin)) != std::string::npos; begin = end + 1) {
    const tp::HistoryRecord record = tp::parse_history_line(std::string_view(finished).substr(begin, end - begin));
    for (const auto& [name, value] : record.values)
      if (name == "step" && value <= 100) through_100 = end + 1;
  }
  const std::size_t limit = (through_100 + finished.size()) / 2;
  REQUIRE(limit > through_100 + 256);
  REQUIRE(limit + 256 < finished.size());
  const std::string last_before = tp::test::read_text(ckpt / "last.pt");

  const auto full =
      tp::test::run_shell(limited(limit) + args + "--resume '" + (ckpt / "step-00000100.pt").string() + "'");
  INFO(full.output);
  CHECK(full.exit_code == 1);
  CHECK(contains(full.output, "cannot append the step record of step "));
  CHECK(contains(full.output, "to " + history.string() + ": write failed: File too large"));
  CHECK(contains(full.output, "every record before this one, each complete"));
  CHECK(contains(full.output, "the checkpoints are not affected"));
  // Whole records only, the last one before the limit; the checkpoints as they were.
  const std::vector<int64_t> cut = tp::test::whole_history_steps(history);
  REQUIRE_FALSE(cut.empty());
  CHECK(cut.back() > 100);
  CHECK(cut.back() < 128);
  CHECK(tp::test::read_text(ckpt / "last.pt") == last_before);
  CHECK(tp::load_checkpoint(ckpt / "step-00000100.pt").step == 100);
  CHECK(tp::test::temporaries_below(dir) == "");

  // With space again the same resume trains steps 101-128 once more: every step once, in order,
  // and the event files hold whole records (a record the limit tore is dropped by the resume).
  const auto again = tp::test::run_host(args + "--resume '" + (ckpt / "step-00000100.pt").string() + "'");
  INFO(again.output);
  CHECK(again.exit_code == 0);
  const std::vector<int64_t> steps = tp::test::whole_history_steps(history);
  REQUIRE(steps.size() == 128);
  for (std::size_t i = 0; i < steps.size(); ++i) CHECK(steps[i] == static_cast<int64_t>(i) + 1);
  CHECK(tp::test::torn_event_files(dir).empty());
  CHECK(tp::test::temporaries_below(dir) == "");

  // A prediction file that hits the limit: named, exit 1, and neither it nor its partial file left.
  const auto predict = tp::test::run_shell(limited(16 * 1024) + "predict " + args + "--checkpoint last --split train");
  INFO(predict.output);
  CHECK(predict.exit_code == 1);
  CHECK(contains(predict.output, "writing the predictions to " + (dir / "predictions_train_last.csv").string()));
  CHECK(contains(predict.output, "File too large"));
  CHECK(contains(predict.output, "Nothing was written under the final name"));
  CHECK_FALSE(std::filesystem::exists(dir / "predictions_train_last.csv"));
  CHECK(tp::test::temporaries_below(dir) == "");
}

TEST_CASE("a sweep.toml that cannot be written stops host sweep before any cell trains, naming it") {
  // 100 bytes hold the lock file's pid but not the sweep's record of its first cell.
  const auto dir = tp::test::fresh_dir("crash_disk_full_sweep");
  const auto run = tp::test::run_shell(limited(100) + "sweep --config tests/experiments/tiny.toml --grid "
                                                      "optim.lr=0.003 --output-dir '" + dir.string() + "'");
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK(contains(run.output, "cannot write " + (dir / "sweep.toml").string() + ": write failed: File too large"));
  CHECK_FALSE(std::filesystem::exists(dir / "sweep.toml"));
  CHECK_FALSE(std::filesystem::exists(dir / "optim.lr=0.003"));
  CHECK(tp::test::temporaries_below(dir) == "");
}
