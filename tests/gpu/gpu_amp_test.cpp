// Mixed precision on CUDA (docs/mixed_precision.md, docs/hardening.md section 8): the fp16 grad
// scaler backs off from a scale that overflows, skipping exactly the steps whose gradients were
// not finite, and the run still trains; a non-finite loss stops fp32, bf16 and fp16 runs under
// train.nan_policy = "stop".
#include <ATen/ATen.h>

#include <cmath>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "gpu/gpu_helpers.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

using tp::gpu_test::contains;
using tp::gpu_test::kNeedsCuda;
using tp::gpu_test::kQuickstart;

TEST_CASE("fp16 on CUDA: an overflowing initial scale backs off, the skipped steps are counted, training ends finite") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  // 2^36: the first steps' scaled gradients cannot fit fp16 (max 65504), so the scaler skips them
  // and halves the scale each time (backoff_factor 0.5) until they fit. growth_interval (2000) is
  // longer than the run (2 x 93 steps), so the scale never grows: after the run it is exactly
  // 2^36 x 0.5^(steps skipped), a power of two.
  const double init_scale = 68719476736.0;  // 2^36, exact in float32
  const auto dir = tp::test::fresh_dir("gpu_fp16_backoff");
  const auto run = tp::test::run_host(kQuickstart + "--set amp.precision=\"fp16\" --set amp.init_scale=68719476736.0 "
                                                    "--set train.log_every_steps=1 --output-dir '" + dir.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(contains(run.output, "amp: the fp16 grad scaler skipped"));

  const auto steps = tp::gpu_test::step_rows(dir);
  REQUIRE(steps.size() > 100);
  REQUIRE(steps.front().has("amp/scale"));
  REQUIRE(steps.front().has("amp/skipped_steps"));
  // Step 1 overflowed: skipped, and the scale already halved.
  CHECK(steps.front().values.at("amp/skipped_steps") == 1);
  CHECK(steps.front().values.at("amp/scale") == init_scale / 2);
  // Step by step: the scale halves exactly when the skip count rises, and stays otherwise.
  double previous_scale = init_scale, previous_skipped = 0;
  for (const tp::test::Row& row : steps) {
    const double scale = row.values.at("amp/scale");
    const double skipped = row.values.at("amp/skipped_steps");
    CAPTURE(row.values.at("step"));
    CHECK(skipped >= previous_skipped);
    CHECK(scale == doctest::Approx(previous_scale * std::pow(0.5, skipped - previous_skipped)).epsilon(1e-12));
    previous_scale = scale;
    previous_skipped = skipped;
  }
  const double skipped = steps.back().values.at("amp/skipped_steps");
  MESSAGE("fp16 from scale 2^36: " << skipped << " steps skipped of " << steps.back().values.at("step")
                                   << ", final scale " << steps.back().values.at("amp/scale"));
  CHECK(skipped >= 1);
  CHECK(skipped <= 40);  // it settled: 2^36 / 2^40 is far below any gradient's overflow point
  CHECK(steps.back().values.at("amp/scale") < init_scale);
  CHECK(steps.back().values.at("amp/scale") == init_scale * std::pow(0.5, skipped));
  // The steps after the scale settled trained: finite loss, quickstart accuracy.
  CHECK(std::isfinite(steps.back().values.at("train/loss")));
  CHECK(std::isfinite(tp::gpu_test::last_epoch_value(dir, "train/loss")));
  CHECK(tp::gpu_test::last_epoch_value(dir, "val/accuracy") >= 0.85);
  // report.toml counts the same skips; the checkpoint holds the backed-off scale.
  const toml::table report = tp::gpu_test::read_toml(dir / "report.toml");
  const double report_skipped = tp::gpu_test::toml_number(report, "scaler_skipped_steps");
  CHECK(report_skipped >= skipped);
  const tp::LoadedCheckpoint saved = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(saved.scaler_scale < init_scale);
  CHECK(saved.scaler_scale == init_scale * std::pow(0.5, report_skipped));
  for (const auto& [name, tensor] : saved.model) CHECK_MESSAGE(at::isfinite(tensor).all().item<bool>(), name);
}

TEST_CASE("a non-finite loss stops fp32, bf16 and fp16 runs on CUDA (nan_policy = stop)") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  // No per-step read on CUDA: the loss is caught at the logging read, here every 2 steps. fp16
  // with "stop" is checked there too (engine/training/nan_policy.h): the scaler would skip every later step.
  for (const std::string precision : {"fp32", "bf16", "fp16"}) {
    CAPTURE(precision);
    const auto dir = tp::test::fresh_dir("gpu_nan_" + precision);
    const auto run = tp::test::run_host(
        "--config tests/integration/c_regression.toml --plugin-dir '" + std::string(tp::test::fixture_plugin_dir()) +
        "' --set run.device=\"cuda\" --set progress.mode=\"off\" --set train.epochs=2 --set optim.name=\"sgd\" "
        "--set optim.lr=1e30 --set train.log_every_steps=2 --set amp.precision=\"" + precision +
        "\" --output-dir '" + dir.string() + "'");
    INFO(run.output);
    CHECK(run.exit_code == 1);
    CHECK(contains(run.output, "the training loss became non-finite"));
    // Caught at a logging read ("between steps A and B", train_meters.cpp) soon after the first
    // update (lr 1e30 blows the weights up; fp16 may first skip a step or two while its scale
    // backs off), well before the run's last step (2 epochs of 256 / 32 = 8 steps).
    const auto at = run.output.find("became non-finite between steps ");
    if (at != std::string::npos) {
      const auto last = run.output.find(" and ", at);
      REQUIRE(last != std::string::npos);
      CHECK(std::stoll(run.output.substr(last + 5)) <= 12);
    } else {
      CHECK(contains(run.output, "became non-finite in epoch "));  // an epoch's read
    }
    // Whatever was saved holds finite weights (hardening.md section 8).
    if (std::filesystem::exists(dir / "checkpoints" / "last.pt"))
      for (const auto& [name, tensor] : tp::load_checkpoint(dir / "checkpoints" / "last.pt").model)
        CHECK_MESSAGE(at::isfinite(tensor).all().item<bool>(), name);
  }
}
