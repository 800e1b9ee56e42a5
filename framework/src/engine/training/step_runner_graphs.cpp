// The step under run.cuda_graphs (docs/cuda_graphs.md): the window fetched and placed first, then
// its phases 2-5 run eagerly (the warm-up, windows a graph cannot replay), captured once, or
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

StepOutcome StepRunner::graphed_step(const MicroBatchFeed& next, int64_t window_length, int64_t epoch,
                                     RunControl& control) {
  StepOutcome outcome;
  // 1. The whole window first, fetched and placed eagerly (the loader, the copy to the device,
  //    the batch transforms): a graph replays the device work of all its micro-batches at once.
  StepPosition at{update_.step(), epoch, 0};
  std::vector<NamedTensors> window;
  std::vector<int64_t> next_indices;
  bool complete = true;
  for (int64_t i = 0; i < window_length; ++i) {
    std::optional<MicroBatch> micro = next();
    if (!micro) {
      complete = false;
      break;
    }
    at.batch = micro->next_index;
    next_indices.push_back(micro->next_index);
    window.push_back(place(std::move(micro->tensors), at));
  }
  outcome.micro_batches = static_cast<int64_t>(window.size());
  const bool update_ready = update_.device_only() && update_.gradients_clear();
  const StepCapture::Use use = capture_->use_for(window, complete, static_cast<int64_t>(window.size()),
                                                 config_.train.grad_accum_steps, update_ready);
  if (use == StepCapture::Use::kEager) {
    // The warm-up, and windows a graph cannot replay (a short or partial window, an empty
    // micro-batch, other shapes): 2-5 eagerly on the placed batches. Until the capture, the
    // phases a graph would hold are probed for host syncs, which would break it.
    std::optional<SyncProbe> probe;
    if (capture_->probing() && update_ready) probe.emplace(placement_.device());
    train_placed_window(window, next_indices, window_length, at);
    if (!complete) return outcome;
    outcome.complete = true;
    close_window(control.take_window_flags(), at, outcome);
    if (probe && !probe->first_sync().empty()) capture_->record_host_sync(probe->first_sync());
    capture_->eager_step_done();
    return outcome;
  }
  if (use == StepCapture::Use::kCapture) {
    // 2-5 captured, not run: the replay below runs them. New optimizer state under a capture
    // would be re-initialised by every replay, so making any is an error there; a capture that
    // fails stops the run (step_graph.h says why it cannot go on eagerly).
    DeviceStepOptimizer* device = device_step(*optim_.optimizer);
    device->forbid_new_state(true);
    capturing_ = true;
    try {
      capture_->capture(window, [&](const std::vector<NamedTensors>& inputs) {
        train_placed_window(inputs, next_indices, window_length, at);
        StepOutcome captured; // a single process: the agreement is the identity, flags the replay's
        close_window(/*control_flags=*/0, at, captured);
      });
    } catch (const std::exception& e) {
      capturing_ = false;
      device->forbid_new_state(false);
      throw Error(std::string(e.what()) + "." + capture_->capture_failure_hint() +
                  " Set run.cuda_graphs = \"off\"; docs/cuda_graphs.md lists what can be captured (a model or loss "
                  "that reads tensor values on the host cannot).");
    }
    capturing_ = false;
    device->forbid_new_state(false);
  }
  // 2-5 as one replay. The window's host outcome is what its capture found: one process, a
  // complete window with data, an update (an fp16 overflow skips it on the device, as eager's
  // skipped update also counts as updated), no non-finite check (train.nan_policy = "stop" reads
  // the loss at logging steps).
  meters_.report().begin_window(false);
  capture_->replay(window);
  outcome.complete = true;
  // The agreement of a single process is the identity; made on the host all the same, so the
  // run's flags and its count of collectives are those of an eager step.
  outcome.agreed = collectives_.agree(control.take_window_flags() | kFlagHasBatch, window_items_.reshape({1}),
                                      "agree on the window's item count and stop flags").flags;
  outcome.updated = true;
  return outcome;
}

void StepRunner::train_placed_window(const std::vector<NamedTensors>& window, const std::vector<int64_t>& next_indices,
                                     int64_t window_length, StepPosition& at) {
  for (std::size_t i = 0; i < window.size(); ++i) {
    at.batch = next_indices[i];
    const AccumulationWindow w{window_length, i == 0, static_cast<int64_t>(i) + 1 == window_length};
    begin_micro_batch(w, at.step);
    train_placed(window[i], w, at);
  }
}

}  // namespace tp
