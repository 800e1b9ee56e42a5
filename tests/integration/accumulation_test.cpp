// Gradient accumulation is exact: batch 32 x 1 and batch 8 x accumulation 4 (and 16 x 2 with a
// short last window) produce the same weights, with momentum SGD, weight decay, clipping and a
// warmup-cosine schedule. The model has no BatchNorm, so the batch size itself does not matter.
#include <ATen/ATen.h>

#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "checkpoint_compare.h"
#include "host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

using tp::test::max_relative_difference;

tp::LoadedCheckpoint train_accumulation(const std::string& name, const std::string& sets) {
  const auto dir = tp::test::fresh_dir(name);
  const auto run = tp::test::run_host("--config tests/integration/accumulation.toml --output-dir '" + dir.string() +
                                      "' --set progress.mode=\"off\" " + sets);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  return tp::load_checkpoint(dir / "checkpoints" / "last.pt");
}

}  // namespace

TEST_CASE("batch 32 x 1 equals batch 8 x accumulation 4") {
  const auto whole = train_accumulation("accum_whole", "");
  const auto windows = train_accumulation("accum_windows", "--set train.batch_size=8 --set train.grad_accum_steps=4");
  CHECK(whole.step == 2 * 64);
  CHECK(windows.step == whole.step); // the schedule and the step counter count optimizer steps
  CHECK(max_relative_difference(whole, windows) < 1e-5);
  // The weights really moved: the comparison is not between two untouched models.
  const auto few = train_accumulation("accum_short", "--set train.epochs=1");
  CHECK(max_relative_difference(whole, few) > 1e-3);
}

TEST_CASE("a short last window is normalised by its own item count") {
  // 2048 / 24 = 85 full batches + 8 samples; windows of 3 batches leave a last window of 2
  // batches (1 full + the 8-sample tail): its loss must be the mean over those 32 samples.
  const auto whole = train_accumulation("accum_tail_whole", "--set train.batch_size=72 --set train.drop_last=false");
  const auto windows = train_accumulation("accum_tail_windows",
                             "--set train.batch_size=24 --set train.grad_accum_steps=3 --set train.drop_last=false");
  CHECK(whole.step == windows.step);
  CHECK(max_relative_difference(whole, windows) < 1e-5);
}

TEST_CASE("a window whose first micro-batch counts no item (an ignore index) trains like the whole batch") {
  // Unshuffled, labels alternate 0, 1 and label 0 is ignored: with micro-batches of one sample
  // every window starts with a micro-batch of zero items. The loss was divided by an estimate
  // made from that count, 0, and the run stopped on a NaN loss at step 1.
  const auto run = [](const std::string& name, const std::string& sets) {
    const auto dir = tp::test::fresh_dir(name);
    const auto result = tp::test::run_host(
        "--config tests/verify/fixture.toml --plugin-dir '" + std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" +
        dir.string() + "' --set data.shuffle=false --set data.train.size=32 --set data.train.classes=2 "
        "--set loss.ignore_label=0 --set data.num_workers=0 " + sets);
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    return tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  };
  const auto whole = run("ignore_whole", "--set train.batch_size=2");
  const auto windows = run("ignore_windows", "--set train.batch_size=1 --set train.grad_accum_steps=2");
  CHECK(whole.step == 16);
  CHECK(windows.step == whole.step);
  CHECK(max_relative_difference(whole, windows) < 1e-5);
}
