// Segmentation and detection on CUDA: configs/segment_shapes.toml (LR-ASPP MobileNetV3-Large,
// cross entropy, mean IoU) and configs/detect_shapes.toml (FCOS ResNet-18 FPN, its loss, COCO mAP),
// each a few hundred optimizer steps in bf16 with one evaluation at the last step, must reach a
// floor of their validation metric that a broken CUDA path (a wrong device, a bf16 overflow, a
// metric that mis-reads CUDA predictions) would miss. Each prints its time per step ("gpu figure:",
// which scripts/gpu_check copies into test-gpu.log for the report). Needs the segmentation and
// detection plugins (TP_BUILD_TASK_MODELS, on in scripts/gpu_check's tree).
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "gpu/gpu_helpers.h"

#include "support/doctest_after_torch.h"

using tp::gpu_test::kNeedsCuda;

namespace {

/// One task's shortened CUDA run and what it must reach.
struct VisionTask {
  std::string name;    ///< the run directory under build/test-runs
  std::string config;  ///< configs/<...>.toml
  std::string plugin;  ///< the model's library under build/plugins
  std::string metric;  ///< the history key of the floor
  int steps = 0;       ///< train.max_steps; the cosine schedule spans them
  double floor = 0;    ///< the metric at the last step must reach it
};

/// The median of time/step_s over the step records after the first (whose window also holds the
/// start-up and cuDNN's autotuning): seconds per optimizer step.
double median_step_seconds(const std::vector<tp::test::Row>& steps) {
  std::vector<double> seconds;
  for (std::size_t i = 1; i < steps.size(); ++i)
    if (steps[i].has("time/step_s")) seconds.push_back(steps[i].values.at("time/step_s"));
  REQUIRE_MESSAGE(!seconds.empty(), "no time/step_s after the first step record");
  std::sort(seconds.begin(), seconds.end());
  const std::size_t mid = seconds.size() / 2;
  return seconds.size() % 2 == 1 ? seconds[mid] : (seconds[mid - 1] + seconds[mid]) / 2;
}

void train_on_cuda(const VisionTask& task) {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  const auto library = std::filesystem::path(tp::test::build_dir()) / "plugins" / task.plugin;
  REQUIRE_MESSAGE(std::filesystem::exists(library),
                  library.string() << " is not built: configure with -DTP_BUILD_TASK_MODELS=ON (scripts/gpu_check does)");
  const auto dir = tp::test::fresh_dir(task.name);
  const std::string steps = std::to_string(task.steps);
  // bf16 autocast (the configs train fp32 on the CPU); 6 loader threads render the shapes (one
  // thread, the configs' CPU choice, would starve a GPU); one evaluation, at the last step.
  const auto run = tp::test::run_host(
      "--config " + task.config + " --set run.device=\"cuda\" --set amp.precision=\"bf16\" --set train.max_steps=" +
      steps + " --set eval.strategy=\"steps\" --set eval.every=" + steps +
      " --set train.log_every_steps=25 --set data.num_workers=6 --set progress.mode=\"off\" --set plots.enabled=false "
      "--output-dir '" + dir.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(tp::gpu_test::toml_string(tp::gpu_test::read_toml(dir / "runtime.toml"), "device").starts_with("cuda"));

  const auto history = tp::test::read_history(dir);
  const auto evals = tp::test::rows_of(history, "eval");
  REQUIRE(evals.size() == 1);
  REQUIRE(evals.back().has("step"));
  CHECK(evals.back().values.at("step") == task.steps);
  REQUIRE_MESSAGE(evals.back().has(task.metric), "no " << task.metric << " in the evaluation record");
  const double metric = evals.back().values.at(task.metric);
  const auto step_rows = tp::test::rows_of(history, "step");
  REQUIRE(step_rows.size() >= 3);
  const double step_s = median_step_seconds(step_rows);
  double data_wait = 0, step_total = 0, peak_mb = 0;
  for (std::size_t i = 1; i < step_rows.size(); ++i) {
    data_wait += step_rows[i].has("time/data_wait_s") ? step_rows[i].values.at("time/data_wait_s") : 0.0;
    step_total += step_rows[i].has("time/step_s") ? step_rows[i].values.at("time/step_s") : 0.0;
  }
  for (const auto& row : step_rows)
    if (row.has("memory/peak_mb")) peak_mb = std::max(peak_mb, row.values.at("memory/peak_mb"));
  MESSAGE("gpu figure: " << task.name << ": " << task.metric << " " << metric << " (floor " << task.floor
                         << ") after " << task.steps << " bf16 steps; " << step_s * 1e3
                         << " ms per step (median of time/step_s, first window left out; beside the other GPU tests"
                            " under ctest -j 4), data wait "
                         << (step_total > 0 ? 100.0 * data_wait / step_total : 0.0) << "%, peak allocated " << peak_mb
                         << " MB");
  CHECK(std::isfinite(metric));
  CHECK(metric >= task.floor);
  CHECK(metric <= 1.0);
}

}  // namespace

// The floors, calibrated on the CPU (the development machine, fp32, the same overrides otherwise,
// one run each): segment_shapes reached val/miou 0.735 after 750 steps (every class's IoU above
// 0.5) but only 0.334 after 400 (background, circles and squares; triangles 0: the task's plateau,
// docs/segmentation.md), so the run is 750 steps and its floor 0.5, above that plateau and far
// above an all-background map (~0.21); detect_shapes reached val/map 0.631 after 300 steps (map_50
// 0.868), so its floor is 0.4. The margins (0.23 each) are for what bf16 autocast and the GPU's
// kernels change in a run (not measured: these configs never trained on CUDA before this test).

// 750 steps of batch 16 (a cosine schedule over them after 50 warm-up steps).
TEST_CASE("segment_shapes trains on CUDA in bf16: val/miou >= 0.5 after 750 steps") {
  train_on_cuda({"gpu_segment_shapes", "configs/segment_shapes.toml", "segmentation.so", "val/miou", 750, 0.5});
}

// 300 steps of batch 16 (a cosine schedule over them after 100 warm-up steps).
TEST_CASE("detect_shapes trains on CUDA in bf16: val/map >= 0.4 after 300 steps") {
  train_on_cuda({"gpu_detect_shapes", "configs/detect_shapes.toml", "detection.so", "val/map", 300, 0.4});
}
