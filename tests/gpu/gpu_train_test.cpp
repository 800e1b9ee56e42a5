// The CUDA side of the pipeline, end to end through the host binary: each precision trains the
// quickstart model to its accuracy, a SIGTERM-interrupted deterministic run resumes bitwise on the
// GPU, and NCCL with one rank gives the weights of the single-process run. Needs a CUDA build of
// LibTorch and a GPU; labelled `gpu` (see CMakeLists.txt).
#include <ATen/ATen.h>

#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "integration/checkpoint_compare.h"
#include "integration/history_reader.h"
#include "integration/host_runner.h"

#include <doctest/doctest.h>

namespace {

// Two epochs of the quickstart, enough for small_cnn to pass 90% on shapes; run.threads=4 keeps
// the CPU side (sample rendering) from competing with the launch thread.
const std::string kQuickstart =
    "--config configs/quickstart.toml --set run.device=\"cuda\" --set progress.mode=\"off\" "
    "--set train.epochs=2 --set plots.enabled=false ";

double last_epoch_value(const std::filesystem::path& dir, const std::string& key) {
  const auto epochs = tp::test::rows_of(tp::test::read_history(dir), "epoch");
  REQUIRE(!epochs.empty());
  const auto it = epochs.back().values.find(key);
  REQUIRE(it != epochs.back().values.end());
  return it->second;
}

}  // namespace

TEST_CASE("the quickstart trains on CUDA in fp32, bf16 and fp16") {
  REQUIRE_MESSAGE(at::hasCUDA(), "gpu_tests need a CUDA build of LibTorch and a visible GPU");
  for (const std::string precision : {"fp32", "bf16", "fp16"}) {
    CAPTURE(precision);
    const auto dir = tp::test::fresh_dir("gpu_quickstart_" + precision);
    const auto run = tp::test::run_host(kQuickstart + "--set amp.precision=\"" + precision + "\" --output-dir '" +
                                        dir.string() + "'");
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(run.output.find("cuda") != std::string::npos);
    CHECK(last_epoch_value(dir, "val/accuracy") >= 0.9);
    const tp::LoadedCheckpoint saved = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
    CHECK(saved.step > 0);
    for (const auto& [name, tensor] : saved.model) {
      INFO(name);
      CHECK(tensor.device().is_cpu());  // checkpoints are device-independent
      CHECK(at::isfinite(tensor).all().item<bool>());
    }
  }
}

TEST_CASE("a deterministic CUDA run interrupted by SIGTERM resumes bitwise") {
  REQUIRE(at::hasCUDA());
  const std::string args = kQuickstart + "--set run.deterministic=true --set train.log_every_steps=5 ";
  const auto straight_dir = tp::test::fresh_dir("gpu_resume_straight");
  const auto straight = tp::test::run_host(args + "--output-dir '" + straight_dir.string() + "'");
  INFO(straight.output);
  REQUIRE(straight.exit_code == 0);

  const auto dir = tp::test::fresh_dir("gpu_resume_interrupted");
  const auto interrupted =
      tp::test::run_host_until_history(args + "--output-dir '" + dir.string() + "'", dir / "history.jsonl", 12);
  INFO(interrupted.output);
  REQUIRE(interrupted.output.find("exit=143") != std::string::npos);
  const auto resumed = tp::test::run_host(args + "--output-dir '" + dir.string() + "' --resume auto");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  const auto a = tp::load_checkpoint(straight_dir / "checkpoints" / "last.pt");
  const auto b = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(a.step == b.step);
  CHECK(tp::test::max_relative_difference(a, b) == 0.0);
}

TEST_CASE("NCCL with one rank trains to the weights of the single-process run") {
  REQUIRE(at::hasCUDA());
  const std::string args = kQuickstart + "--set run.deterministic=true --set train.epochs=1 ";
  const auto single_dir = tp::test::fresh_dir("gpu_nccl_single");
  const auto single = tp::test::run_host(args + "--output-dir '" + single_dir.string() + "'");
  INFO(single.output);
  REQUIRE(single.exit_code == 0);

  const auto dir = tp::test::fresh_dir("gpu_nccl_rank");
  const auto ranked = tp::test::run_host("--nproc-per-node 1 " + args + "--set dist.backend=\"nccl\" --output-dir '" +
                                         dir.string() + "'");
  INFO(ranked.output);
  REQUIRE(ranked.exit_code == 0);
  CHECK(ranked.output.find("backend nccl") != std::string::npos);
  const auto a = tp::load_checkpoint(single_dir / "checkpoints" / "last.pt");
  const auto b = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(a.step == b.step);
  // One rank: the all-reduce sums one contribution and divides by one, so only the order of
  // floating-point work could differ; it does not.
  CHECK(tp::test::max_relative_difference(a, b) <= 1e-6);
}

TEST_CASE("a non-finite loss stops bf16 and fp32 runs on CUDA (nan_policy = stop)") {
  REQUIRE_MESSAGE(at::hasCUDA(), "gpu_tests need a CUDA build of LibTorch and a visible GPU");
  // No per-step read on CUDA: the loss is caught at the logging read, here every 2 steps.
  for (const std::string precision : {"fp32", "bf16"}) {
    CAPTURE(precision);
    const auto run = tp::test::run_host(
        "--config tests/integration/c_regression.toml --plugin-dir '" + std::string(TP_TEST_FIXTURE_PLUGIN_DIR) +
        "' --set run.device=\"cuda\" --set progress.mode=\"off\" --set train.epochs=2 --set optim.name=\"sgd\" "
        "--set optim.lr=1e30 --set train.log_every_steps=2 --set amp.precision=\"" + precision +
        "\" --output-dir '" + tp::test::fresh_dir("gpu_nan_" + precision).string() + "'");
    INFO(run.output);
    CHECK(run.exit_code == 1);
    CHECK(run.output.find("non-finite") != std::string::npos);
  }
}
