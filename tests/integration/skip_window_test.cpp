// data.on_bad_sample = "skip" with a whole micro-batch skipped inside an accumulation window:
// the epoch still has its batches_per_epoch() micro-batches, so windows close where the schedule
// expects, no gradient is carried into the next epoch, and a window with no item at all takes
// no update but still counts as a step.
#include <ATen/ATen.h>

#include <filesystem>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "checkpoint_compare.h"
#include "host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

// 64 samples, unshuffled, micro-batches of 8 in windows of 4: 2 optimizer steps per epoch.
// The fixture fails samples [fail_first, fail_first + fail_count) of the train split.
const std::string kSkipWindowArgs = "--config tests/integration/c_regression.toml --plugin-dir '" +
                          std::string(tp::test::fixture_plugin_dir()) +
                          "' --set progress.mode=\"off\" --set data.train.size=64 --set train.batch_size=8 "
                          "--set train.grad_accum_steps=4 --set data.shuffle=false --set data.on_bad_sample=\"skip\" "
                          "--set eval.strategy=\"no\" --set checkpoint.save_top_k=0 --set checkpoint.keep_last=4 "
                          "--set data.max_bad_fraction=1 "; // a whole micro-batch of 64 samples bad, on purpose

std::filesystem::path train_skip_window(const std::string& name, const std::string& sets) {
  const auto dir = tp::test::fresh_dir(name);
  const auto run = tp::test::run_host(kSkipWindowArgs + "--output-dir '" + dir.string() + "' " + sets);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  return dir;
}

bool all_finite(const tp::LoadedCheckpoint& c) {
  for (const auto& [name, tensor] : c.model)
    if (!at::isfinite(tensor).all().item<bool>()) return false;
  return true;
}

}  // namespace

TEST_CASE("an all-skipped micro-batch inside a window: steps per epoch as scheduled, nothing crosses epochs") {
  // Batch 1 (samples 8-15) of every epoch is skipped whole, inside the first window.
  const auto straight = train_skip_window("skip_window_straight", "--set train.epochs=2 --set data.train.fail_first=8 "
                                                      "--set data.train.fail_count=8");
  const auto end = tp::load_checkpoint(straight / "checkpoints" / "last.pt");
  CHECK(end.step == 2 * 2);
  const auto epoch_one = straight / "checkpoints" / "step-00000002.pt";
  REQUIRE(std::filesystem::exists(epoch_one)); // the end of epoch 1 is at step 2
  CHECK(tp::load_checkpoint(epoch_one).epoch == 1);
  CHECK(all_finite(end));
  // A run resumed from the end of epoch 1 starts epoch 2 without gradients; so must the straight
  // run have, or their weights differ.
  const auto resumed_dir = tp::test::fresh_dir("skip_window_resumed");
  const auto resumed = tp::test::run_host(kSkipWindowArgs + "--output-dir '" + resumed_dir.string() +
                                          "' --set train.epochs=2 --set data.train.fail_first=8 "
                                          "--set data.train.fail_count=8 --resume '" + epoch_one.string() + "'");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  const auto again = tp::load_checkpoint(resumed_dir / "checkpoints" / "last.pt");
  CHECK(again.step == end.step);
  CHECK(tp::test::max_relative_difference(end, again) == 0.0);
}

TEST_CASE("a window whose every sample is skipped takes no update but counts as a step") {
  // Samples 0-31 fail: the first window of each epoch has no item at all. A save after every
  // step keeps step 1's weights, which that empty window left as they were.
  const auto dir = train_skip_window("skip_window_empty", "--set train.epochs=2 --set data.train.fail_first=0 "
                                              "--set data.train.fail_count=32 --set checkpoint.strategy=\"steps\" "
                                              "--set checkpoint.every=1");
  const auto end = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(end.step == 2 * 2);
  CHECK(all_finite(end)); // no 0/0 normalisation reached the weights
  const auto idle = tp::load_checkpoint(dir / "checkpoints" / "step-00000001.pt");
  CHECK(all_finite(idle));
  // The second window of each epoch did update: the weights are not those of the empty window.
  CHECK(tp::test::max_relative_difference(end, idle) > 1e-3);
}

TEST_CASE("an epoch whose every sample is skipped stops the run (exit 1), saving nothing of it") {
  // Before, it 'finished 1 epochs (2 steps)', exit 0, with untrained weights in last.pt.
  const auto dir = tp::test::fresh_dir("skip_window_all");
  const auto run = tp::test::run_host(kSkipWindowArgs + "--output-dir '" + dir.string() +
                                      "' --set train.epochs=1 --set data.train.fail_first=0 --set data.train.fail_count=64");
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK(run.output.find("epoch 1: every training sample failed to load (64 skipped under data.on_bad_sample") !=
        std::string::npos);
  CHECK(run.output.find("index 0: ") != std::string::npos);  // the first failure, with its reason
  CHECK_FALSE(std::filesystem::exists(dir / "checkpoints" / "last.pt"));
}
