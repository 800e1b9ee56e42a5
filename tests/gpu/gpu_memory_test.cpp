// Activation checkpointing on CUDA (docs/activation_checkpointing.md): deep_cnn with
// [model] activation_checkpointing = true keeps one feature map per block instead of two, so the
// allocator's peak (memory/peak_mb, report.toml peak_device_mb) falls, while the weights after the
// same deterministic steps are those of the run without it.
#include <ATen/ATen.h>

#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "gpu/gpu_helpers.h"
#include "integration/checkpoint_compare.h"

#include <doctest/doctest.h>

using tp::gpu_test::kNeedsCuda;
using tp::gpu_test::kQuickstart;

namespace {

struct PeakRun {
  std::filesystem::path dir;
  double history_peak_mb = 0;  ///< memory/peak_mb of the last step record
  double report_peak_mb = 0;   ///< report.toml peak_device_mb (the whole fit)
};

PeakRun train_deep_cnn(const std::string& name, bool checkpointing) {
  // 17 units (stem + 16 blocks) of 64 channels at 32x32, batch 128: one feature map is
  // 128 x 64 x 32 x 32 x 4 B = 33.5 MB; without checkpointing each unit keeps two for backward
  // (~1.1 GB), with it one (~0.57 GB) plus one unit's recompute. 20 deterministic steps.
  PeakRun r;
  r.dir = tp::test::fresh_dir(name);
  const auto run = tp::test::run_host(
      kQuickstart +
      "--set model.component=\"org.torchhost.deep_cnn\" --set model.depth=16 --set model.width=64 "
      "--set train.batch_size=128 --set train.max_steps=20 --set train.log_every_steps=5 --set run.deterministic=true "
      "--set data.train.val_size=256 --set model.activation_checkpointing=" + std::string(checkpointing ? "true" : "false") +
      " --output-dir '" + r.dir.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const auto steps = tp::gpu_test::step_rows(r.dir);
  REQUIRE(!steps.empty());
  REQUIRE(steps.back().has("memory/peak_mb"));
  r.history_peak_mb = steps.back().values.at("memory/peak_mb");
  const toml::table report = tp::gpu_test::read_toml(r.dir / "report.toml");
  r.report_peak_mb = tp::gpu_test::toml_number(report, "peak_device_mb");
  const toml::table runtime = tp::gpu_test::read_toml(r.dir / "runtime.toml");
  CHECK(tp::gpu_test::toml_bool(runtime, "activation_checkpointing") == checkpointing);
  return r;
}

}  // namespace

TEST_CASE("activation checkpointing on CUDA: the peak memory falls, the weights after 20 steps are the same") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  const PeakRun off = train_deep_cnn("gpu_checkpointing_off", false);
  const PeakRun on = train_deep_cnn("gpu_checkpointing_on", true);
  MESSAGE("deep_cnn depth 16 width 64, batch 128: peak allocated " << off.history_peak_mb << " MB without, "
                                                                     << on.history_peak_mb << " MB with checkpointing ("
                                                                     << on.history_peak_mb / off.history_peak_mb
                                                                     << "); report.toml " << off.report_peak_mb
                                                                     << " / " << on.report_peak_mb << " MB");
  CHECK(off.history_peak_mb > 500);  // the feature maps of 17 units are there
  CHECK(on.history_peak_mb > 0);
  CHECK(on.history_peak_mb < 0.8 * off.history_peak_mb);
  CHECK(off.history_peak_mb - on.history_peak_mb > 200);  // several units' maps (33.5 MB each) fewer
  CHECK(on.report_peak_mb < 0.8 * off.report_peak_mb);

  const auto a = tp::load_checkpoint(off.dir / "checkpoints" / "last.pt");
  const auto b = tp::load_checkpoint(on.dir / "checkpoints" / "last.pt");
  CHECK(a.step == 20);
  CHECK(b.step == 20);
  const double difference = tp::test::max_relative_difference(a, b);
  MESSAGE("weights after 20 steps, checkpointing on vs off: max relative difference " << difference);
  CHECK(difference <= 1e-5);
}
