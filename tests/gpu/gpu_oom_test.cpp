// train.on_oom with a real CUDA out-of-memory error (docs/engine.md, "Out of memory"; the CPU
// tests in tests/oom inject the same c10::OutOfMemoryError from a fixture model). An MLP with one
// hidden layer of 2^20 units on the 4 inputs of c_regression: a micro-batch of B rows makes a
// B x 2^20 float32 activation, 4 MiB per row, so B = 65536 asks for one 256 GiB tensor, which no
// GPU of this suite has (an H200 has about 140 GiB). "fail" stops with the report; "split" halves
// the micro-batch until a piece fits and trains on. This entry runs alone (RUN_SERIAL): it fills
// the GPU.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "gpu/gpu_helpers.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

using tp::gpu_test::contains;
using tp::gpu_test::count_of;
using tp::gpu_test::kNeedsCuda;

namespace {

constexpr int64_t kBatch = 65536;
constexpr double kRowMb = 1048576.0 * 4 / 1e6;  // one row of the hidden activation, MB

/// Two optimizer steps of 65536 rows (plain SGD; no evaluation, no best checkpoint).
std::string oom_args(const std::filesystem::path& dir, const std::string& on_oom) {
  return "--config tests/integration/c_regression.toml --plugin-dir '" + std::string(tp::test::fixture_plugin_dir()) +
         "' --set run.device=\"cuda\" --set progress.mode=\"off\" --set train.epochs=1 --set train.batch_size=" +
         std::to_string(kBatch) + " --set data.train.size=" + std::to_string(2 * kBatch) +
         " --set data.num_workers=2 --set 'model.hidden=[1048576]' --set optim.name=\"sgd\" --set optim.lr=0.01 "
         "--set eval.strategy=\"no\" --set checkpoint.save_top_k=0 --set train.log_every_steps=1 "
         "--set train.on_oom=\"" + on_oom + "\" --output-dir '" + dir.string() + "'";
}

}  // namespace

TEST_CASE("a real CUDA out-of-memory error: on_oom = fail reports it; on_oom = split halves the micro-batch and trains") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  SUBCASE("on_oom = fail: exit 1 with the batch size, the device's peak and what to do") {
    const auto dir = tp::test::fresh_dir("gpu_oom_fail");
    const auto run = tp::test::run_host(oom_args(dir, "fail"));
    INFO(run.output);
    CHECK(run.exit_code == 1);
    const std::string where = "out of memory on cuda:0 in the forward of 65536 samples at step 1 (epoch 1; "
                              "train.batch_size = 65536, train.grad_accum_steps = 1); peak memory allocated ";
    const auto at = run.output.find(where);
    REQUIRE(at != std::string::npos);
    const double peak_mb = std::stod(run.output.substr(at + where.size()));
    MESSAGE("on_oom = fail: peak allocated " << peak_mb << " MB before the 256 GiB request");
    CHECK(peak_mb >= 0);
    CHECK(peak_mb < kBatch * kRowMb);  // the 256 GiB tensor was never allocated
    CHECK(contains(run.output, "host tune batch-size --keep-global-batch"));
    CHECK(contains(run.output, "set train.on_oom = \"split\""));
    CHECK(contains(run.output, "CUDA out of memory"));  // the caching allocator's own message
    CHECK_FALSE(std::filesystem::exists(dir / "checkpoints" / "last.pt"));
  }
  SUBCASE("on_oom = split: pieces of 65536 / 2^k rows until one fits; two steps train, finite") {
    const auto dir = tp::test::fresh_dir("gpu_oom_split");
    const auto run = tp::test::run_host(oom_args(dir, "split"));
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(contains(run.output, "out of memory in the forward of 65536 samples at step 1 (epoch 1)"));
    const tp::LoadedCheckpoint saved = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
    const int64_t splits = saved.micro_batch_splits;
    const int64_t piece = kBatch / std::max<int64_t>(splits, 1);
    MESSAGE("on_oom = split: micro-batches of 65536 cut in " << splits << " pieces of " << piece << " rows ("
                                                             << piece * kRowMb / 1e3 << " GB per activation)");
    // 65536 rows (256 GiB in one tensor) and 32768 (128 GiB, and backward needs two more) cannot
    // fit any GPU here; 2048 rows (8 GiB per tensor) fit every one.
    CHECK(splits >= 4);
    CHECK(splits <= 32);
    CHECK((splits & (splits - 1)) == 0);  // halves: a power of two
    // One warning per halving, each naming the pieces from then on; all in the first step.
    const int halvings = static_cast<int>(std::lround(std::log2(static_cast<double>(splits))));
    CHECK(count_of(run.output, "train.on_oom = \"split\": micro-batches are cut in ") == static_cast<std::size_t>(halvings));
    CHECK(contains(run.output, "micro-batches are cut in " + std::to_string(splits) + " pieces of at most " +
                                   std::to_string(piece) + " samples"));
    CHECK(count_of(run.output, "at step 2 (epoch 1") == 0);  // the second step started with the pieces
    CHECK(saved.step == 2);
    for (const auto& [name, tensor] : saved.model) CHECK_MESSAGE(at::isfinite(tensor).all().item<bool>(), name);
    // Both steps trained on finite losses; the peak is what a fitting piece allocated: at least
    // its hidden activation, at most the GPU.
    const auto steps = tp::gpu_test::step_rows(dir);
    REQUIRE(steps.size() == 2);
    for (const auto& row : steps) CHECK(std::isfinite(row.values.at("train/loss")));
    const toml::table report = tp::gpu_test::read_toml(dir / "report.toml");
    const double peak_mb = tp::gpu_test::toml_number(report, "peak_device_mb");
    const double total_mb = tp::gpu_test::toml_number(report, "device_total_mb");
    MESSAGE("peak allocated " << peak_mb << " MB of " << total_mb << " MB");
    CHECK(peak_mb >= piece * kRowMb);
    CHECK(peak_mb <= total_mb);
  }
}
