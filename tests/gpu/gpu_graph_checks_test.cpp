// run.cuda_graphs on a GPU, its checks beside the numbers (docs/cuda_graphs.md): a graphed step
// never waits for the device (run.sync_debug = "error") and the audit does catch a step that does,
// "auto" times both kinds of step and records its choice, and the reason the host insists on fused
// optimizers: torch::optim::Adam captured in a graph replays wrong numbers, while the fused update
// replays exactly with an lr changed between replays. gpu_graph_test.cpp compares whole runs.
#include <ATen/ATen.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/optim/optimizer.h>

#include "tp/framework/optim/device_step.h"
#include "tp/framework/optim/optimizer_factory.h"
#include "unit/optim/optimizer_test_util.h"
#endif

#include "gpu/gpu_helpers.h"

#include <doctest/doctest.h>

using tp::gpu_test::kNeedsCuda;
using tp::gpu_test::kQuickstart;

namespace {

tp::test::HostRun train_audited(const std::string& args, const std::filesystem::path& dir) {
  return tp::test::run_host(args + "--output-dir '" + dir.string() + "'");
}

}  // namespace

TEST_CASE("a graphed step never waits for the device; the audit catches a step that does") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  const std::string audited = kQuickstart + "--set train.max_steps=60 --set train.log_every_steps=20 "
                                            "--set eval.strategy=\"no\" --set run.sync_debug=\"error\" ";
  for (const std::string precision : {"bf16", "fp16"}) {
    CAPTURE(precision);
    for (const std::string graphs : {"on", "off"}) {
      CAPTURE(graphs);
      const auto dir = tp::test::fresh_dir("gpu_graph_audit_" + precision + "_" + graphs);
      const auto run = train_audited(audited + "--set amp.precision=\"" + precision + "\" --set run.cuda_graphs=\"" + graphs + "\" ", dir);
      INFO(run.output);
      CHECK(run.exit_code == 0); // eager fused steps are sync-free too
    }
  }
  // The per-parameter loop under fp16 reads the overflow flag on the host every step.
  const auto dir = tp::test::fresh_dir("gpu_graph_audit_loop");
  const auto run = train_audited(audited + "--set amp.precision=\"fp16\" --set optim.implementation=\"for_loop\" ", dir);
  INFO(run.output);
  CHECK(run.exit_code != 0);
  CHECK(tp::gpu_test::contains(run.output, "synchroniz"));
}

TEST_CASE("\"auto\" times eager and graphed steps and keeps the faster") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  const auto dir = tp::test::fresh_dir("gpu_graph_auto");
  const auto run = train_audited(kQuickstart + "--set train.max_steps=80 --set eval.strategy=\"no\" --set amp.precision=\"bf16\" "
                                       "--set run.cuda_graphs=\"auto\" ",
                         dir);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const toml::table runtime = tp::gpu_test::read_toml(dir / "runtime.toml");
  INFO(tp::test::read_text(dir / "runtime.toml"));
  const double eager_ms = tp::gpu_test::toml_number(runtime, "cuda_graphs.eager_step_ms");
  const double graph_ms = tp::gpu_test::toml_number(runtime, "cuda_graphs.graph_step_ms");
  REQUIRE(eager_ms > 0);
  REQUIRE(graph_ms > 0);
  CHECK(tp::gpu_test::toml_bool(runtime, "cuda_graphs.graphed") == (graph_ms < eager_ms));
  // small_cnn at batch 64 is launch-bound: a graph removes most of the step's host time.
  CHECK(graph_ms < eager_ms);
  MESSAGE("gpu figure: gpu_graph_auto: small_cnn bf16 batch 64, eager " << eager_ms << " ms/step, graphed " << graph_ms
                                                                         << " ms/step (runtime.toml, whole steps)");
}

TEST_CASE("torch::optim::Adam replays wrong under capture; the fused update replays exactly with a changing lr") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
  constexpr int kWarmup = 3, kReplays = 20;
  const c10::Device cuda(c10::kCUDA, 0);
  const at::Tensor input = at::linspace(-1, 1, 64 * 16, at::TensorOptions().device(cuda)).reshape({64, 16});
  const at::Tensor target = at::sin(input.sum(1, true));
  const at::Tensor init = at::linspace(-0.3, 0.3, 16, at::TensorOptions().device(cuda)).reshape({16, 1});
  auto lr_at = [](int step) { return 0.01 * (1.0 + 0.1 * step); };
  // loss = mean((x w - y)^2), one step: forward, backward, update.
  auto train_step = [&](const at::Tensor& w, const std::function<void()>& update) {
    const at::Tensor loss = (input.mm(w) - target).pow(2).mean();
    loss.backward();
    update();
  };

  for (const bool fused : {false, true}) {
    CAPTURE(fused);
    // Eager reference.
    at::Tensor eager_w = init.clone().requires_grad_();
    std::vector<tp::StateTensor> eager_state{{"w", eager_w, false}};
    tp::OptimSection o = tp::test::optim_section("adam", fused ? "fused" : "for_loop");
    o.lr = lr_at(0);
    o.weight_decay = 0.0;
    tp::BuiltOptimizer eager_opt = tp::make_optimizer(o, eager_state);
    for (int s = 0; s < kWarmup + kReplays; ++s) {
      eager_opt.optimizer->param_groups()[0].options().set_lr(lr_at(s));
      train_step(eager_w, [&] {
        eager_opt.optimizer->step();
        eager_opt.optimizer->zero_grad(true);
      });
    }

    // The same steps, the last kReplays as replays of one captured step.
    at::Tensor w = init.clone().requires_grad_();
    std::vector<tp::StateTensor> state{{"w", w, false}};
    tp::BuiltOptimizer opt = tp::make_optimizer(o, state);
    tp::DeviceStepOptimizer* device = tp::device_step(*opt.optimizer);
    CHECK((device != nullptr) == fused);
    auto update = [&] {
      if (device != nullptr) device->step_on_device(at::Tensor());
      else opt.optimizer->step();
      opt.optimizer->zero_grad(true);
    };
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, 0);
    at::cuda::CUDAEvent ready;
    ready.record(c10::cuda::getCurrentCUDAStream(0));
    ready.block(side);
    {
      const c10::cuda::CUDAStreamGuard guard(side);
      for (int s = 0; s < kWarmup; ++s) {
        opt.optimizer->param_groups()[0].options().set_lr(lr_at(s));
        if (device != nullptr) device->stage_learning_rates();
        train_step(w, update);
      }
      at::cuda::CUDAGraph graph;
      graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      train_step(w, update);
      graph.capture_end();
      for (int s = kWarmup; s < kWarmup + kReplays; ++s) {
        opt.optimizer->param_groups()[0].options().set_lr(lr_at(s));
        if (device != nullptr) device->stage_learning_rates(); // outside the graph: the replay reads it
        graph.replay();
      }
      side.synchronize();
    }
    const double difference = ((w.detach() - eager_w.detach()).abs().max() / eager_w.detach().abs().max()).item<double>();
    MESSAGE("gpu figure: gpu_graph_captured_adam: " << std::string(fused ? "the fused update" : "torch::optim::Adam")
                                                   << " replayed 20 times vs eager: max relative difference " << difference);
    if (fused) {
      CHECK(difference == 0.0); // the same kernels, the lr and step counts read on the device
    } else {
      // The loop's bias corrections and lr are host doubles baked in at capture: step 4's
      // numbers replayed 20 times, far from the eager path.
      CHECK(difference > 1e-3);
    }
  }
#endif
}
