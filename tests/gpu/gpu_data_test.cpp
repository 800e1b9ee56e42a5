// Batches and run switches on CUDA (docs/training.md, "Sanity runs and speed switches"): with
// loader workers, pinned batches and non_blocking copies keep the GPU fed (the loop's data wait is
// a small share of the step, far below the same run loading on its own thread), and runtime.toml
// records the device, the GPU (name, compute capability, memory), the effective switches and the
// CUDA, cuDNN and NCCL versions.
#include <ATen/ATen.h>
#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
#include <ATen/cuda/CUDAContext.h>  // the test's own view of the GPU; a CPU build compiles gpu_tests too
#endif
#include <torch/version.h>

#include <algorithm>
#include <string>

#include "gpu/gpu_helpers.h"

#include <doctest/doctest.h>

using tp::gpu_test::contains;
using tp::gpu_test::kNeedsCuda;
using tp::gpu_test::kQuickstart;
using tp::gpu_test::toml_bool;
using tp::gpu_test::toml_number;
using tp::gpu_test::toml_string;

TEST_CASE("pinned batches and non_blocking copies on CUDA: with loader workers the data wait is a small share of the step") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  // deep_cnn (8 blocks of width 96 at 32x32, fp32, no TF32) makes a step of batch 256 about a
  // TFLOP of GPU work, ~20 ms; rendering its 256 shapes takes 10-40 ms on one thread (measured on
  // the 2-core development machine: 24-47 ms beside a compile). 31 steps, a record every 5; the
  // first window (start-up, first batches) is left out of the share.
  const std::string args = kQuickstart +
                           "--set train.epochs=1 --set model.component=\"org.torchhost.deep_cnn\" --set model.width=96 "
                           "--set model.depth=8 --set train.batch_size=256 --set data.train.size=7936 "
                           "--set data.train.val_size=256 --set train.log_every_steps=5 --set data.prefetch=8 ";
  const auto inline_dir = tp::test::fresh_dir("gpu_data_wait_inline");
  const auto inline_run =
      tp::test::run_host(args + "--set data.num_workers=0 --output-dir '" + inline_dir.string() + "'");
  INFO(inline_run.output);
  REQUIRE(inline_run.exit_code == 0);
  const auto workers_dir = tp::test::fresh_dir("gpu_data_wait_workers");
  const auto workers_run =
      tp::test::run_host(args + "--set data.num_workers=8 --output-dir '" + workers_dir.string() + "'");
  INFO(workers_run.output);
  REQUIRE(workers_run.exit_code == 0);

  const double inline_share = tp::gpu_test::data_wait_share(inline_dir);
  const double workers_share = tp::gpu_test::data_wait_share(workers_dir);
  const double step_ms = 1e3 * tp::gpu_test::step_rows(workers_dir).back().values.at("time/step_s");
  MESSAGE("data wait / step time: " << inline_share << " loading on the training thread, " << workers_share
                                    << " with 8 workers (step " << step_ms << " ms); epoch data_wait_fraction "
                                    << tp::gpu_test::last_epoch_value(workers_dir, "time/data_wait_fraction"));
  // Loading on the training thread, every batch is waited for; with 8 workers the batches are
  // ready (pinned, collated) before the step asks, and the copy does not block the thread.
  CHECK(inline_share > 0.0);
  CHECK(workers_share < inline_share);
  CHECK(workers_share < 0.2);
  CHECK(tp::gpu_test::last_epoch_value(workers_dir, "time/data_wait_fraction") < 0.3);
  // runtime.toml says how batches reach the GPU (pinned memory is not recorded separately: the
  // loader pins exactly when the device is CUDA, trainer.cpp).
  const toml::table runtime = tp::gpu_test::read_toml(workers_dir / "runtime.toml");
  CHECK(toml_string(runtime, "device") == "cuda:0");
  CHECK(toml_bool(runtime, "non_blocking_copies"));
}

TEST_CASE("runtime.toml on CUDA: the device, the GPU, the effective switches, the CUDA, cuDNN and NCCL versions") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  const std::string args = kQuickstart + "--set train.max_steps=5 --set train.log_every_steps=5 ";
  SUBCASE("switches on") {
    const auto dir = tp::test::fresh_dir("gpu_runtime_switches");
    const auto run = tp::test::run_host(args + "--set amp.precision=\"bf16\" --set run.cudnn_benchmark=true "
                                               "--set run.tf32=true --set run.channels_last=true --output-dir '" +
                                        dir.string() + "'");
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    const toml::table runtime = tp::gpu_test::read_toml(dir / "runtime.toml");
    INFO(tp::test::read_text(dir / "runtime.toml"));
    CHECK(toml_string(runtime, "device") == "cuda:0");
    CHECK(toml_string(runtime, "precision") == "bf16");
    CHECK(toml_number(runtime, "world_size") == 1);
    CHECK(toml_number(runtime, "intra_op_threads") >= 1);
    CHECK_FALSE(toml_bool(runtime, "deterministic"));
    CHECK(toml_bool(runtime, "cudnn_benchmark"));
    CHECK(toml_bool(runtime, "tf32"));
    CHECK(toml_bool(runtime, "channels_last"));
    CHECK(toml_bool(runtime, "non_blocking_copies"));
    CHECK(toml_string(runtime, "libtorch") == TORCH_VERSION);
#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
    // The GPU, against what this process's CUDA runtime says of device 0.
    const cudaDeviceProp* gpu = at::cuda::getDeviceProperties(0);
    MESSAGE("runtime.toml: gpu " << toml_string(runtime, "gpu_name") << ", capability "
                                 << toml_string(runtime, "gpu_compute_capability"));
    CHECK(toml_string(runtime, "gpu_name") == std::string(gpu->name));
    CHECK(toml_string(runtime, "gpu_compute_capability") ==
          std::to_string(gpu->major) + "." + std::to_string(gpu->minor));
    CHECK(toml_number(runtime, "gpu_memory_mb") == static_cast<double>(gpu->totalGlobalMem / 1000000));
    CHECK(toml_number(runtime, "gpu_count") == static_cast<double>(c10::cuda::device_count()));
#else
    FAIL("runtime.toml's GPU fields are checked in a CUDA build of LibTorch only");
#endif
    // The versions, against what this process's LibTorch reports of itself.
    const std::string cuda = toml_string(runtime, "provenance.cuda");
    const std::string cudnn = toml_string(runtime, "provenance.cudnn");
    const std::string nccl = toml_string(runtime, "provenance.nccl");
    MESSAGE("runtime.toml: cuda " << cuda << ", cudnn " << cudnn << ", nccl " << nccl);
    CHECK(!cuda.empty());
    CHECK(cuda == tp::gpu_test::cuda_runtime_version());
    CHECK(!cudnn.empty());
    CHECK(cudnn == tp::gpu_test::cudnn_version());
    CHECK(std::count(nccl.begin(), nccl.end(), '.') == 2);  // "2.x.y" (the NCCL the host was built with)
    // report.toml of the same run: the GPU's memory and this run's peak on it.
    const toml::table report = tp::gpu_test::read_toml(dir / "report.toml");
    CHECK(toml_string(report, "device") == "cuda:0");
    const double total_mb = toml_number(report, "device_total_mb");
    const double peak_mb = toml_number(report, "peak_device_mb");
    MESSAGE("report.toml: device_total_mb " << total_mb << ", peak_device_mb " << peak_mb);
    CHECK(total_mb > 8000);
    CHECK(peak_mb > 0);
    CHECK(peak_mb < total_mb);
  }
  SUBCASE("run.deterministic turns cudnn_benchmark off, and says so") {
    const auto dir = tp::test::fresh_dir("gpu_runtime_deterministic");
    const auto run = tp::test::run_host(args + "--set run.deterministic=true --set run.cudnn_benchmark=true "
                                               "--output-dir '" + dir.string() + "'");
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(contains(run.output, "run.cudnn_benchmark is ignored because run.deterministic = true"));
    const toml::table runtime = tp::gpu_test::read_toml(dir / "runtime.toml");
    CHECK(toml_bool(runtime, "deterministic"));
    CHECK_FALSE(toml_bool(runtime, "cudnn_benchmark"));  // the effective value, not the configured one
    CHECK_FALSE(toml_bool(runtime, "tf32"));
    CHECK(toml_string(runtime, "precision") == "fp32");
  }
}
