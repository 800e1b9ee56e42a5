// Every row of callback.h's table of which events honour which requests: a fixture callback
// (tests/fixtures/request_callback) returns one request from one event at one step, and the run
// shows where it was honoured: the final step of a stopped run, the step of the last.pt a save
// request wrote (checkpoint.strategy = "no", so no other save writes it).
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include <ATen/ATen.h>

#include "tp/framework/checkpoint/checkpoint.h"

#include "host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

// 64 samples in batches of 8: 8 optimizer steps per epoch, 3 epochs.
constexpr int kStepsPerEpoch = 8;

struct Case {
  int event;          ///< TP_EVENT_*
  int requests;       ///< TP_REQUEST_* mask
  int at_step;        ///< event->step the callback answers at
  const char* sets;   ///< extra --set options
};

/// Runs the C regression fixture with the request callback answering as `c` says, in `dir`
/// (`callback_toml`: more keys of the callback's table); returns the host's output.
std::string run_in(const std::filesystem::path& dir, const Case& c, const std::string& more,
                   const std::string& callback_toml = "") {
  const auto config = dir / ("run-" + std::to_string(c.event) + ".toml");
  std::ofstream(config) << tp::test::read_text(std::filesystem::path(tp::test::source_dir()) /
                                               "tests/integration/c_regression.toml")
                        << "\n[[callbacks]]\ncomponent = \"org.torchhost.test.request_callback\"\nevent = " << c.event
                        << "\nrequests = " << c.requests << "\nat_step = " << c.at_step << "\n" << callback_toml;
  const auto run = tp::test::run_host(
      "--config '" + config.string() + "' --plugin-dir '" + std::string(tp::test::fixture_plugin_dir()) +
      "' --output-dir '" + dir.string() + "' --set progress.mode=\"off\" --set train.epochs=3 "
      "--set data.train.size=64 --set train.batch_size=8 --set train.log_every_steps=1 " + c.sets + " " + more);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  return run.output;
}

/// A fresh run directory trained as `c` says.
std::filesystem::path train_callback_requests(const std::string& name, const Case& c, const std::string& more = "") {
  const auto dir = tp::test::fresh_dir(name);
  run_in(dir, c, more);
  return dir;
}

int64_t last_step(const std::filesystem::path& dir) {
  const auto path = dir / "checkpoints" / "last.pt";
  REQUIRE(std::filesystem::exists(path));
  return tp::load_checkpoint(path).step;
}

const char* const kStopSets = "--set eval.strategy=\"no\" --set checkpoint.strategy=\"epoch\" --set checkpoint.save_top_k=0";
const char* const kSaveSets = "--set eval.strategy=\"no\" --set checkpoint.strategy=\"no\" --set checkpoint.save_top_k=0";
const char* const kEvalSaveSets = "--set eval.strategy=\"epoch\" --set checkpoint.strategy=\"no\" --set checkpoint.save_top_k=0";

}  // namespace

TEST_CASE("stop requests: immediate from *_END events, at the next window boundary from the others") {
  struct Row {
    const char* name;
    Case c;
    int64_t stopped_at;
  };
  const Row rows[] = {
      {"fit_begin", {1, 1, 0, kStopSets}, 1},                                       // after the first step
      {"epoch_begin", {3, 1, kStepsPerEpoch, kStopSets}, kStepsPerEpoch + 1},       // first step of epoch 2
      {"step_begin", {5, 1, 3, kStopSets}, 4},                                      // the step it began
      {"step_end", {6, 1, 3, kStopSets}, 3},                                        // that step
      {"epoch_end", {4, 1, kStepsPerEpoch, kStopSets}, kStepsPerEpoch},             // that epoch
      {"eval_end", {7, 1, kStepsPerEpoch, "--set eval.strategy=\"epoch\" --set checkpoint.save_top_k=0"},
       kStepsPerEpoch},
      {"checkpoint_save", {8, 1, kStepsPerEpoch, kStopSets}, kStepsPerEpoch + 1},   // the epoch-1 save
  };
  for (const Row& row : rows) {
    INFO(row.name);
    CHECK(last_step(train_callback_requests(std::string("request_stop_") + row.name, row.c)) == row.stopped_at);
  }
  // CHECKPOINT_LOAD: a run resumed from the end of epoch 1 stops after one more step.
  const auto dir = train_callback_requests("request_stop_checkpoint_load", {2, 0, -1, kStopSets}, "--set train.epochs=1");
  CHECK(last_step(dir) == kStepsPerEpoch);
  run_in(dir, {9, 1, -1, kStopSets}, "--resume auto");
  CHECK(last_step(dir) == kStepsPerEpoch + 1);
}

TEST_CASE("a resumed run's events before its first step carry the epoch it resumes in, not 0") {
  // Before, CHECKPOINT_LOAD and FIT_BEGIN of a run resumed at epoch 1 (0-based) said epoch 0.
  const auto dir = train_callback_requests("events_epoch_on_resume", {2, 0, -1, kStopSets}, "--set train.epochs=1");
  const std::string output = run_in(dir, {2, 0, -1, kStopSets}, "--resume auto --set train.epochs=2", "log_events = true\n");
  INFO(output);
  CHECK(tp::test::contains(output, "request_callback: event 9 epoch 1 step 8\n"));  // CHECKPOINT_LOAD
  CHECK(tp::test::contains(output, "request_callback: event 1 epoch 1 step 8\n"));  // FIT_BEGIN
  CHECK(tp::test::contains(output, "request_callback: event 4 epoch 1 step 16\n")); // EPOCH_END
}

TEST_CASE("a callback's stop inside an epoch pauses there: the resumed run trains every batch, as one never stopped") {
  // Before, the stop ended the epoch: last.pt said "epoch 2, batch 0" and a resume skipped the
  // epoch's remaining batches (20 of 24 steps in all).
  const auto straight = train_callback_requests("request_stop_pause_straight", {5, 0, -1, kStopSets});
  const auto dir = train_callback_requests("request_stop_pause", {5, 1, 3, kStopSets});
  const auto paused = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(paused.step == 4);
  CHECK(paused.epoch == 0); // inside the first epoch, at its fifth batch
  CHECK(paused.batch == 4);
  const std::string log = tp::test::read_text(dir / "train.log");
  CHECK(log.find("finished 0 epochs (4 steps)") != std::string::npos);
  CHECK(log.find("a callback requested a stop inside epoch 1; saved where it stopped") != std::string::npos);
  run_in(dir, {5, 1, 3, kStopSets}, "--resume auto"); // asks again at step 3, which this run never reaches
  const auto a = tp::load_checkpoint(straight / "checkpoints" / "last.pt");
  const auto b = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(b.step == 3 * kStepsPerEpoch);
  REQUIRE(a.model.size() == b.model.size());
  for (std::size_t i = 0; i < a.model.size(); ++i) {
    INFO(a.model[i].first);
    CHECK(at::equal(a.model[i].second, b.model[i].second));
  }
}

TEST_CASE("a pause saves where it stopped with checkpoint.strategy = \"no\" too, as its message says") {
  const auto dir = train_callback_requests("request_stop_pause_no_saves", {5, 1, 3, kSaveSets});
  const auto paused = tp::load_checkpoint(dir / "checkpoints" / "last.pt"); // before: no file at all
  CHECK(paused.step == 4);
  CHECK(paused.batch == 4);
}

TEST_CASE("a stop at the last epoch's end is not an early stop") {
  const auto dir = train_callback_requests("request_stop_at_end", {4, 1, 3 * kStepsPerEpoch, kStopSets});
  CHECK(last_step(dir) == 3 * kStepsPerEpoch);
  const std::string log = tp::test::read_text(dir / "train.log");
  CHECK(log.find("finished 3 epochs (24 steps)") != std::string::npos);
  CHECK(log.find("stopped early") == std::string::npos);
}

TEST_CASE("save requests write last.pt where they are honoured; FIT_END's is ignored") {
  struct Row {
    const char* name;
    Case c;
    int64_t saved_at;
  };
  const Row rows[] = {
      {"fit_begin", {1, 2, 0, kSaveSets}, 1},
      {"epoch_begin", {3, 2, kStepsPerEpoch, kSaveSets}, kStepsPerEpoch + 1},
      {"step_begin", {5, 2, 3, kSaveSets}, 4},
      {"step_end", {6, 2, 3, kSaveSets}, 3},
      {"epoch_end", {4, 2, 2 * kStepsPerEpoch, kSaveSets}, 2 * kStepsPerEpoch},
      {"eval_end", {7, 2, kStepsPerEpoch, kEvalSaveSets}, kStepsPerEpoch},
  };
  for (const Row& row : rows) {
    INFO(row.name);
    CHECK(last_step(train_callback_requests(std::string("request_save_") + row.name, row.c)) == row.saved_at);
  }
  const auto ignored = train_callback_requests("request_save_fit_end", {2, 2, -1, kSaveSets});
  CHECK_FALSE(std::filesystem::exists(ignored / "checkpoints" / "last.pt"));
}

namespace {

/// report.toml's `collectives`: the collectives the run made (gradient buckets excluded).
int64_t collectives_of(const std::filesystem::path& dir) {
  const std::string report = tp::test::read_text(dir / "report.toml");
  const auto at = report.find("\ncollectives = ");
  REQUIRE(at != std::string::npos);
  return std::stoll(report.substr(at + 15));
}

/// Collectives per optimizer step: the difference between a run of 8 steps and one of 4 (the
/// same set-up and ending), over the 4 extra steps. No evaluation, no checkpoint, one epoch.
double collectives_per_step(const std::string& name, int log_every, bool callback) {
  int64_t counts[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const auto dir = tp::test::fresh_dir(name + std::to_string(i));
    const auto config = dir / "run.toml";
    std::ofstream out(config);
    out << tp::test::read_text(std::filesystem::path(tp::test::source_dir()) / "tests/integration/c_regression.toml");
    if (callback) out << "\n[[callbacks]]\ncomponent = \"org.torchhost.test.request_callback\"\nrequests = 0\n";
    out.close();
    const auto run = tp::test::run_host(
        "--config '" + config.string() + "' --plugin-dir '" + std::string(tp::test::fixture_plugin_dir()) +
        "' --output-dir '" + dir.string() + "' --set progress.mode=\"off\" --set train.epochs=1 "
        "--set data.train.size=64 --set train.batch_size=4 --set train.max_steps=" + std::to_string(4 * (i + 1)) +
        " --set train.log_every_steps=" + std::to_string(log_every) + " " + kSaveSets);
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    counts[i] = collectives_of(dir);
  }
  return static_cast<double>(counts[1] - counts[0]) / 4.0;
}

}  // namespace

TEST_CASE("collectives per optimizer step: one agreement carries the step's flags and the logged loss") {
  // Before issue 26 a logging step made three (the window's agreement, the loss read, the STEP_END
  // agreement) and every other step one. Now the loss rides in the agreement, and STEP_END's
  // agreement is made only where callbacks exist to ask.
  CHECK(collectives_per_step("collectives_quiet_", 1000, false) == 1.0);
  CHECK(collectives_per_step("collectives_logged_", 1, false) == 1.0);
  CHECK(collectives_per_step("collectives_callback_", 1, true) == 2.0);
}

TEST_CASE("train.fast_dev_run writes nothing, whatever asks: a callback's save request, a stop signal") {
  // The save request at every step end: honoured elsewhere (the cases above), ignored here.
  const auto requested = train_callback_requests("fast_dev_run_save_request", {6, 2, -1, kSaveSets}, // step_end, save
                                                 "--set train.fast_dev_run=true");
  CHECK_FALSE(std::filesystem::exists(requested / "checkpoints"));
  // SIGTERM raised by the callback as step 1 begins (fast_dev_run's only step): after the step the
  // loop's stop path saves last.pt in any other run (resume_test); under fast_dev_run it stops
  // without writing.
  const auto dir = tp::test::fresh_dir("fast_dev_run_signal");
  const auto config = dir / "run.toml";
  std::ofstream(config) << tp::test::read_text(std::filesystem::path(tp::test::source_dir()) /
                                               "tests/integration/c_regression.toml")
                        << "\n[[callbacks]]\ncomponent = \"org.torchhost.test.request_callback\"\nevent = "
                        << 5 << "\nrequests = 0\nsignal = " << SIGTERM << "\n"; // step_begin
  const auto run = tp::test::run_host("--config '" + config.string() + "' --plugin-dir '" +
                                      std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" + dir.string() +
                                      "' --set progress.mode=\"off\" --set train.fast_dev_run=true");
  INFO(run.output);
  CHECK(run.exit_code == 128 + SIGTERM);
  CHECK(run.output.find("stopped by signal 15 at step 1; train.fast_dev_run saves nothing.") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "checkpoints"));
}
