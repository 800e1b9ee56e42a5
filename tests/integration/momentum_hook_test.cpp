// The model's per-step hook (plugin ABI 1.14, tp_model_v1_t.after_optimizer_step) end to end,
// through the momentum_model fixture, whose lent buffers count what the host did: one call per
// optimizer step, never per micro-batch, with steps 1, 2, 3... and the schedule's total; and a
// momentum target updated there resumes bit for bit (stop inside an epoch, --resume auto), on one
// rank and on two.
#include <ATen/ATen.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

// 64 samples in batches of 8, windows of 2: 4 optimizer steps and 8 micro-batches per epoch, 3 epochs.
constexpr int64_t kSteps = 12;
constexpr int64_t kMicroBatches = 24;

/// Trains tests/integration/momentum_hook.toml into `dir` with `more` options (and, when
/// `stop_at` >= 0, a request_callback that asks for a stop at STEP_BEGIN of that 0-based step),
/// through `launcher` options first ("--nproc-per-node 2 ").
void train(const std::filesystem::path& dir, const std::string& more, int stop_at = -1, const std::string& launcher = "") {
  const auto config = dir / "run.toml";
  std::filesystem::create_directories(dir);
  std::ofstream(config) << tp::test::read_text(std::filesystem::path(tp::test::source_dir()) /
                                               "tests/integration/momentum_hook.toml")
                        << "\n[[callbacks]]\ncomponent = \"org.torchhost.test.request_callback\"\nevent = 5\nrequests = "
                        << (stop_at >= 0 ? 1 : 0) << "\nat_step = " << stop_at << "\n";
  const auto run = tp::test::run_host(launcher + "--config '" + config.string() + "' --plugin-dir '" +
                                      std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" + dir.string() +
                                      "' --set progress.mode=\"off\" " + more);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
}

int64_t weight(const tp::LoadedCheckpoint& checkpoint, const std::string& name) {
  for (const auto& [key, tensor] : checkpoint.model)
    if (key == name) return tensor.item<int64_t>();
  FAIL("no tensor " << name << " in the checkpoint");
  return -1;
}

const at::Tensor& tensor(const tp::LoadedCheckpoint& checkpoint, const std::string& name) {
  for (const auto& [key, t] : checkpoint.model)
    if (key == name) return t;
  FAIL("no tensor " << name << " in the checkpoint");
  return checkpoint.model.front().second;
}

}  // namespace

TEST_CASE("after_optimizer_step: once per optimizer step under gradient accumulation, never per micro-batch") {
  const auto dir = tp::test::fresh_dir("momentum_hook_accumulation");
  train(dir, "");
  const auto saved = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(saved.step == kSteps);
  CHECK(weight(saved, "forward_calls") == kMicroBatches);
  CHECK(weight(saved, "hook_calls") == kSteps);  // not kMicroBatches: the window's last micro-batch only
  CHECK(weight(saved, "last_step") == kSteps);   // each call the previous + 1 (the fixture refuses gaps)
  CHECK(weight(saved, "last_total") == kSteps);  // the total the cosine schedule spans
  // The target moved towards the online layer, and stayed out of the optimizer.
  CHECK_FALSE(at::equal(tensor(saved, "target.weight"), tensor(saved, "online.weight")));
  CHECK(tp::test::contains(tp::test::read_text(dir / "train.log"),
                           "after_optimizer_step is called after each of the 12 optimizer steps"));
}

TEST_CASE("a momentum target updated by after_optimizer_step resumes bit for bit after a stop inside an epoch") {
  const auto straight = tp::test::fresh_dir("momentum_hook_straight");
  train(straight, "");
  const auto dir = tp::test::fresh_dir("momentum_hook_paused");
  train(dir, "", /*stop_at=*/4);  // asked at step 5's start, stops after it: inside epoch 2
  const auto paused = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(paused.step == 5);
  CHECK(weight(paused, "hook_calls") == 5);
  train(dir, "--resume auto", /*stop_at=*/4);  // the resumed run starts past that step
  const auto a = tp::load_checkpoint(straight / "checkpoints" / "last.pt");
  const auto b = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(b.step == kSteps);
  CHECK(weight(b, "hook_calls") == kSteps);
  REQUIRE(a.model.size() == b.model.size());
  for (std::size_t i = 0; i < a.model.size(); ++i) {
    INFO(a.model[i].first);
    CHECK(at::equal(a.model[i].second, b.model[i].second));
  }
}

TEST_CASE("two ranks: one call per optimizer step on each, and the momentum target resumes bit for bit") {
  // 64 samples over 2 ranks in batches of 8, windows of 2: 2 optimizer steps per epoch, 6 in all;
  // each rank's fixture refuses a step out of sequence, so a rank called otherwise fails the run.
  const std::string two = "--nproc-per-node 2 ";
  const auto straight = tp::test::fresh_dir("momentum_hook_ddp_straight");
  train(straight, "", -1, two);
  const auto dir = tp::test::fresh_dir("momentum_hook_ddp_paused");
  train(dir, "", /*stop_at=*/2, two);
  CHECK(weight(tp::load_checkpoint(dir / "checkpoints" / "last.pt"), "hook_calls") == 3);
  train(dir, "--resume auto", /*stop_at=*/2, two);
  const auto a = tp::load_checkpoint(straight / "checkpoints" / "last.pt");
  const auto b = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(a.step == 6);
  CHECK(weight(a, "hook_calls") == 6);
  CHECK(weight(a, "last_total") == 6);
  CHECK(weight(a, "forward_calls") == 12);  // rank 0's micro-batches (buffers are rank 0's)
  REQUIRE(a.model.size() == b.model.size());
  for (std::size_t i = 0; i < a.model.size(); ++i) {
    INFO(a.model[i].first);
    CHECK(at::equal(a.model[i].second, b.model[i].second));
  }
}
