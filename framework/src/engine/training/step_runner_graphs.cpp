// run.cuda_graphs (docs/cuda_graphs.md): a CUDA graph as another way of running the one step's
// phases (step_runner.cpp's optimizer_step): a whole held window's 2-3 and 5 captured once, then
// replayed. The phases themselves are step_runner.cpp's; the bookkeeping is StepCapture's.
#include <ATen/ATen.h>

#include <optional>
#include <utility>

#include "step_capture.h"
#include "step_graph.h"
#include "tp/framework/dist/collectives.h"
#include "engine/training/step_runner.h"
#include "tp/framework/error.h"
#include "tp/framework/optim/device_step.h"

namespace tp {

void StepRunner::prepare_cuda_graphs(const CudaGraphFacts& facts) {
  const CudaGraphMode mode = config_.run.cuda_graphs;
  if (mode == CudaGraphMode::kOff) {
    graph_report_ = cuda_graphs_table("off", false, "off");
    return;
  }
  if (!cuda_graphs_allowed(mode, facts)) { // "auto" with reasons against: eager, and why
    const std::string why = describe_refusals(cuda_graph_refusals(facts));
    log_.info("run.cuda_graphs = \"auto\": training eagerly: " + why);
    graph_report_ = cuda_graphs_table("auto", false, "eager: " + why);
    return;
  }
  capture_ = std::make_unique<StepCapture>(mode, placement_.device(), log_);
  log_.info("run.cuda_graphs = \"" + std::string(to_string(mode)) + "\": the training step is captured in a CUDA graph after " +
            std::to_string(StepCapture::kWarmupSteps) + " eager steps" +
            (mode == CudaGraphMode::kAuto ? " and kept if timing shows it faster" : ""));
}

std::optional<std::string> StepRunner::take_cuda_graph_report() {
  if (capture_ && capture_->take_report_change()) return capture_->runtime_table();
  return std::exchange(graph_report_, std::nullopt);
}

StepRunner::GraphPlan StepRunner::plan_graph(const HeldWindow& held, bool complete) const {
  // A capture assumes the update is device work only and no gradient is left from an earlier window.
  const bool update_ready = update_.device_only() && update_.gradients_clear();
  const auto length = static_cast<int64_t>(held.batches.size());
  const StepCapture::Use use =
      capture_->use_for(held.batches, complete, length, config_.train.grad_accum_steps, update_ready);
  // Until the capture, an eager window's phases are probed for the host syncs that would break it.
  return {use, use == StepCapture::Use::kEager && capture_->probing() && update_ready};
}

void StepRunner::run_graph(StepCapture::Use use, const HeldWindow& held, int64_t window_length, StepPosition& at) {
  if (use == StepCapture::Use::kCapture) {
    // 2-3 and 5 captured, not run: the replay below runs them. 4, the agreement, is not in the
    // graph: a graph runs in a single process, where the agreement does no device work, so it runs
    // on the host after each replay (close_window), where it reads the run's flags. New optimizer
    // state under a capture would be re-initialised by every replay, so making any is an error
    // there; a capture that fails stops the run (step_graph.h says why it cannot go on eagerly).
    DeviceStepOptimizer* device = device_step(*optim_.optimizer);
    device->forbid_new_state(true);
    window_.capturing = true;
    try {
      capture_->capture(held.batches, [&](const std::vector<NamedTensors>& inputs) {
        train_held(inputs, held.next_indices, window_length, at);
        update_parameters();
      });
    } catch (const std::exception& e) {
      device->forbid_new_state(false);
      throw Error(std::string(e.what()) + "." + capture_->capture_failure_hint() +
                  " Set run.cuda_graphs = \"off\"; docs/cuda_graphs.md lists what can be captured (a model or loss "
                  "that reads tensor values on the host cannot).");
    }
    device->forbid_new_state(false);
  }
  meters_.report().begin_window(false);
  capture_->replay(held.batches);
  // The window's host state is what its capture found: every micro-batch trained whole (a graph
  // replays only complete windows without an empty micro-batch), no split, and no non-finite
  // check (train.nan_policy = "stop" reads the loss at logging steps). An fp16 overflow skips the
  // update on the device, as eager's skipped update also counts as updated.
  window_ = WindowState{};
  window_.batches = static_cast<int64_t>(held.batches.size());
}

}  // namespace tp
