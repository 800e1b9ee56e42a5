// The CUDA side of the pipeline, end to end through the host binary: each precision trains the
// quickstart model to its accuracy, and a SIGTERM-interrupted deterministic run resumes bitwise on
// the GPU. Needs a CUDA build of LibTorch and a GPU; labelled `gpu` (see CMakeLists.txt).
#include <ATen/ATen.h>

#include <cmath>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "gpu/gpu_helpers.h"
#include "integration/checkpoint_compare.h"

#include <doctest/doctest.h>

using tp::gpu_test::kNeedsCuda;
using tp::gpu_test::kQuickstart;
using tp::gpu_test::last_epoch_value;

TEST_CASE("the quickstart trains on CUDA in fp32, bf16 and fp16") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  for (const std::string precision : {"fp32", "bf16", "fp16"}) {
    CAPTURE(precision);
    const auto dir = tp::test::fresh_dir("gpu_quickstart_" + precision);
    const auto run = tp::test::run_host(kQuickstart + "--set amp.precision=\"" + precision + "\" --output-dir '" +
                                        dir.string() + "'");
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(run.output.find("cuda") != std::string::npos);
    CHECK(last_epoch_value(dir, "val/accuracy") >= 0.9);
    CHECK(std::isfinite(last_epoch_value(dir, "train/loss")));
    const tp::LoadedCheckpoint saved = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
    CHECK(saved.step > 0);
    for (const auto& [name, tensor] : saved.model) {
      INFO(name);
      CHECK(tensor.device().is_cpu());  // checkpoints are device-independent
      CHECK(at::isfinite(tensor).all().item<bool>());
    }
  }
}

namespace {

/// Trains `args` straight, and again stopped by SIGTERM once the history has `lines` lines and
/// resumed with --resume auto; both end at the same step with the same checkpoint, bit for bit.
void check_resume_is_bitwise(const std::string& args, const std::string& stem, int lines = 12) {
  const auto straight_dir = tp::test::fresh_dir(stem + "_straight");
  const auto straight = tp::test::run_host(args + "--output-dir '" + straight_dir.string() + "'");
  INFO(straight.output);
  REQUIRE(straight.exit_code == 0);
  CHECK(std::isfinite(last_epoch_value(straight_dir, "train/loss")));
  const auto dir = tp::test::fresh_dir(stem + "_interrupted");
  const auto interrupted =
      tp::test::run_host_until_history(args + "--output-dir '" + dir.string() + "'", dir / "history.jsonl", lines);
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

}  // namespace

TEST_CASE("a deterministic CUDA run interrupted by SIGTERM resumes bitwise") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  check_resume_is_bitwise(kQuickstart + "--set run.deterministic=true --set train.log_every_steps=5 ", "gpu_resume");
}

TEST_CASE("LAMB under an epoch-interval cosine with train and eval batch limits trains on CUDA and resumes bitwise") {
  // This session's CPU-tested additions on the device: LAMB's on-device clip factor and trust
  // ratios (no host read), schedule.interval = "epoch" (the lr changes at epoch boundaries only:
  // the resume lands inside epoch 2) and the limits on training and evaluation batches.
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  check_resume_is_bitwise(kQuickstart + "--set run.deterministic=true --set train.log_every_steps=5 "
                          "--set optim.name=\"lamb\" --set optim.eps=1e-6 --set schedule.name=\"cosine\" "
                          "--set schedule.interval=\"epoch\" --set schedule.warmup_epochs=1 "
                          "--set schedule.warmup_prefix=false --set train.limit_batches=40 --set eval.limit_batches=4 ",
                          "gpu_lamb");
}
