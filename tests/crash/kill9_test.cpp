// The kill -9 loop: a short run with a checkpoint every 2 optimizer steps and TensorBoard events
// is started with `--resume auto`, killed with SIGKILL at a random moment (during start-up,
// training, evaluation or in the middle of a checkpoint write), and started again, 20 times; then
// it runs to the end. After every kill the checkpoint directory must hold a resume point that
// loads with nothing damaged to skip (writes are atomic), the resume step never goes backwards and
// history.jsonl holds whole records (a torn last line aside); at the end the history holds every
// logged step once, the event files whole records, and no temporary is left anywhere. Then
// `host predict` and `host sweep` are killed the same way: no prediction file is ever incomplete,
// the next command sweeps what the killed ones left, and the sweep finishes. The seed is printed;
// TP_KILL9_SEED=<n> repeats a sequence of kill times. Label `kill9`: ctest -L kill9.
#include <toml++/toml.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/checkpoint/checkpoint_manager.h"

#include "integration/host_runner.h"
#include "support/run_files.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

// c_regression (plain C dataset, linear model): 512 samples / 16 = 32 steps per epoch, 24 epochs
// = 768 steps, longer than the 20 kills need. Two loader workers, so kills land with threads alive.
const std::string kCommon = "--config tests/integration/c_regression.toml --set progress.mode=\"off\" "
                          "--set run.threads=1 --set train.epochs=24 --set train.batch_size=16 "
                          "--set data.train.size=512 --set data.num_workers=2 --set train.log_every_steps=4 "
                          "--set checkpoint.strategy=\"steps\" --set checkpoint.every=2 --set checkpoint.keep_last=2 "
                          "--set checkpoint.save_top_k=1 --set logging.tensorboard=true ";
const std::string kKill9Args = kCommon + "--resume auto ";
constexpr int kTrials = 20;
constexpr int64_t kTotalSteps = 24 * 32;

}  // namespace

TEST_CASE("kill -9 at random moments never leaves the run without a loadable resume point") {
  const char* env_seed = std::getenv("TP_KILL9_SEED");
  const unsigned seed = env_seed != nullptr ? static_cast<unsigned>(std::strtoul(env_seed, nullptr, 10)) : 20261122u;
  MESSAGE("kill -9 loop seed " << seed << " (repeat with TP_KILL9_SEED=" << seed << ")");
  std::mt19937 rng(seed);
  // Start-up (loading LibTorch and the plugins) takes ~0.7-1 s, so the range covers kills before
  // the first save as well as kills during training and saves.
  std::uniform_int_distribution<int> delay_ms(200, 1800);

  const auto dir = tp::test::fresh_dir("kill9_loop");
  const auto ckpt = dir / "checkpoints";
  const std::string host = std::string("'") + tp::test::build_dir() + "/bin/host' " + kKill9Args + "--plugin-dir '" +
                           tp::test::fixture_plugin_dir() + "' --output-dir '" + dir.string() + "'";
  int64_t previous_step = 0;
  int finished_early = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const int delay = delay_ms(rng);
    const auto run = tp::test::run_shell(host + " >/dev/null 2>&1 & pid=$!; sleep " + std::to_string(delay / 1000.0) +
                                         "; kill -9 $pid 2>/dev/null; wait $pid; echo \"exit=$?\"");
    INFO("trial " << trial << ", killed after " << delay << " ms: " << run.output);
    if (run.output.find("exit=0") != std::string::npos) ++finished_early; // it outran the kill
    else CHECK(run.output.find("exit=137") != std::string::npos);

    std::string warnings;
    const auto point =
        tp::CheckpointManager::find_resume_point(ckpt, [&](const std::string& line) { warnings += line + "\n"; });
    INFO(warnings);
    CHECK(warnings.empty()); // no damaged file: a kill mid-write leaves only a temporary behind
    if (!point) {
      CHECK(previous_step == 0); // killed before the first save
      continue;
    }
    CHECK(point->skipped == 0);
    CHECK(point->checkpoint.step >= previous_step);
    previous_step = point->checkpoint.step;
    const std::vector<int64_t> logged = tp::test::whole_history_steps(dir / "history.jsonl", /*allow_torn_tail=*/true);
    CHECK(std::is_sorted(logged.begin(), logged.end()));
  }
  MESSAGE("after " << kTrials << " kills the resume point is step " << previous_step << " of " << kTotalSteps << " ("
                   << finished_early << " runs finished before their kill)");

  const auto last = tp::test::run_host(kKill9Args + "--plugin-dir '" + tp::test::fixture_plugin_dir() + "' --output-dir '" +
                                       dir.string() + "'");
  INFO(last.output);
  REQUIRE(last.exit_code == 0);
  CHECK(tp::load_checkpoint(ckpt / "last.pt").step == kTotalSteps);
  // Temporaries of killed writers are swept at the next run's start; every logged step once.
  for (const auto& entry : std::filesystem::directory_iterator(ckpt))
    CHECK_MESSAGE(!entry.path().filename().string().starts_with("."), "left behind: " << entry.path());
  CHECK(tp::test::temporaries_below(dir) == "");
  const std::vector<int64_t> logged = tp::test::whole_history_steps(dir / "history.jsonl");
  REQUIRE(logged.size() == static_cast<std::size_t>(kTotalSteps / 4));
  for (std::size_t i = 0; i < logged.size(); ++i) CHECK(logged[i] == 4 * (static_cast<int64_t>(i) + 1));
  CHECK(tp::test::torn_event_files(dir) == "");

  // host predict of 20,000 rows, killed 3 times at a random moment while it writes its partial
  // file: the file is complete or absent, never cut short, and the next prediction removes the
  // partial files the killed ones left.
  const std::string predict = "'" + std::string(tp::test::build_dir()) + "/bin/host' predict " + kCommon + "--plugin-dir '" +
                              tp::test::fixture_plugin_dir() + "' --output-dir '" + dir.string() + "' --split train " +
                              "--set data.train.size=20000 --checkpoint last";
  const auto predictions = dir / "predictions_train_last.csv";
  auto complete_or_absent = [&] {
    if (!std::filesystem::exists(predictions)) return true;
    const std::string text = tp::test::read_text(predictions);
    return std::count(text.begin(), text.end(), '\n') == 20001 && text.ends_with("\n");
  };
  auto partial_files = [&] {
    std::string found;
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.path().filename().string().find(".partial") != std::string::npos) found += entry.path().string() + " ";
    return found;
  };
  std::uniform_int_distribution<int> predict_ms(0, 200);
  for (int trial = 0; trial < 3; ++trial) {
    const int delay = predict_ms(rng);
    const auto run = tp::test::run_shell(predict + " >/dev/null 2>&1 & pid=$!; for i in $(seq 1 3000); do ls '" +
                                         predictions.string() + "'.partial* >/dev/null 2>&1 && break; sleep 0.01; " +
                                         "done; sleep " + std::to_string(delay / 1000.0) +
                                         "; kill -9 $pid 2>/dev/null; wait $pid; echo \"exit=$?\"");
    INFO("predict killed " << delay << " ms into its partial file: " << run.output);
    CHECK(complete_or_absent());
  }
  const auto predicted = tp::test::run_shell(predict);
  INFO(predicted.output);
  CHECK(predicted.exit_code == 0);
  CHECK(complete_or_absent());
  CHECK(partial_files() == "");
  CHECK(tp::test::temporaries_below(dir) == "");

  // host sweep, killed twice: its cell (SIGTERM on the sweep's death) saves, and holds the sweep's
  // lock until it has; sweep.toml always parses; the third sweep finishes the grid.
  const auto sweep_dir = dir / "sweep";
  const std::string sweep = "'" + std::string(tp::test::build_dir()) + "/bin/host' sweep " + kCommon + "--plugin-dir '" +
                            tp::test::fixture_plugin_dir() + "' --set train.epochs=4 --grid optim.lr=0.05 --output-dir '" +
                            sweep_dir.string() + "'";
  std::uniform_int_distribution<int> sweep_ms(500, 2500);
  for (int trial = 0; trial < 2; ++trial) {
    const int delay = sweep_ms(rng);
    const auto run = tp::test::run_shell(sweep + " >/dev/null 2>&1 & pid=$!; sleep " + std::to_string(delay / 1000.0) +
                                         "; kill -9 $pid 2>/dev/null; wait $pid; flock -w 60 '" +
                                         (sweep_dir / "sweep.lock").string() + "' true; echo \"exit=$?\"");
    INFO("sweep killed after " << delay << " ms: " << run.output);
    CHECK(run.output.find("exit=0") != std::string::npos); // the lock came free
    if (std::filesystem::exists(sweep_dir / "sweep.toml"))
      CHECK_NOTHROW(toml::parse_file((sweep_dir / "sweep.toml").string()));
  }
  const auto swept = tp::test::run_shell(sweep);
  INFO(swept.output);
  CHECK(swept.exit_code == 0);
  CHECK(std::filesystem::exists(sweep_dir / "comparison.csv"));
  CHECK(tp::test::temporaries_below(sweep_dir) == "");
}
