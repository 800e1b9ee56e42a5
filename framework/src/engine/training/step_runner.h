// One optimizer step, whole (ARCH-15): the accumulation window's micro-batches (fetch, forward
// under autocast, the window's exact loss normalisation, the non-finite-loss policy, out-of-memory
// splits, backward with the data-parallel gradient all-reduce), the ranks' one agreement, then the
// parameter update's phases (ParameterUpdate: the update, and what advances with every step).
// One body for every step: with run.cuda_graphs a CUDA graph is another way of running its
// phases 2-3 and 5 (captured once, then replayed; docs/cuda_graphs.md), not a second step. The loop
// (train_loop.cpp) calls optimizer_step() once per step and reads one StepOutcome
// (docs/engine.md).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "tp/framework/amp/precision.h"
#include "tp/framework/config/run_config.h"
#include "tp/framework/engine/batch_placement.h"
#include "engine/training/cuda_graph_policy.h"
#include "engine/training/parameter_update.h"
#include "engine/training/step_capture.h"
#include "tp/framework/engine/run_components.h"
#include "engine/training/train_meters.h"
#include "engine/training/window_flags.h"
#include "tp/framework/optim/optimizer_factory.h"
#include "tp/framework/util/log.h"

namespace tp {

class Collectives;
class GradientReducer;
struct CheckpointContents;
struct LoadedCheckpoint;

/// Where a micro-batch sits in its gradient-accumulation window.
struct AccumulationWindow {
  int64_t length; ///< micro-batches in this window (the epoch's last one may be short)
  bool first;
  bool last;
};

/// Where the loop is, for messages: optimizer steps taken, 0-based epoch, next batch index.
struct StepPosition {
  int64_t step;
  int64_t epoch;
  int64_t batch;
};

/// One micro-batch from the loader: its tensors and the index of the batch after it.
struct MicroBatch {
  NamedTensors tensors; ///< empty: every sample was skipped (data.on_bad_sample = "skip")
  int64_t next_index = 0;
};

/// Fetches the next micro-batch of the epoch (nothing: the loader ran dry).
using MicroBatchFeed = std::function<std::optional<MicroBatch>()>;

/// What one optimizer step did.
struct StepOutcome {
  int64_t micro_batches = 0; ///< micro-batches fetched and trained
  bool complete = false;     ///< false: the loader ran dry inside the window (no update, no step counted)
  bool updated = false;      ///< the weights changed (not skipped for a non-finite loss, not an empty window)
  double lr = std::numeric_limits<double>::quiet_NaN(); ///< the lr the step trained with (group 0's)
  std::vector<double> group_lrs; ///< every parameter group's lr the step trained with, in group order
  uint32_t agreed = 0;       ///< the window's WindowFlag bits, ORed over ranks
  /// On logging steps (train.log_every_steps): the logging window's update statistics (reading
  /// them is a host sync, on those steps only); nothing otherwise.
  std::optional<UpdateStats> update_stats;
};

class StepRunner {
 public:
  /// Every reference must outlive the runner; `optim` and `model_state` may still be empty here
  /// (the Trainer fills them, then calls build_gradient_reducer() and prepare_cuda_graphs(),
  /// before the first step). `update` is phases 5 and 6 of every step.
  StepRunner(const RunConfig& config, RunComponents& parts, const std::vector<StateTensor>& model_state,
             BuiltOptimizer& optim, ParameterUpdate& update, const BatchPlacement& placement, TrainMeters& meters,
             Logger& log, Collectives& collectives);
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  /// [all ranks] (Re)builds the gradient all-reduce over the model's trainable parameters (a
  /// collective shape check under data-parallel training) and logs its buckets. Call once the
  /// model is placed, and again when frozen groups join (a captured step is then captured anew).
  void build_gradient_reducer();
  /// [main] run.cuda_graphs: decides from `facts` whether steps may be captured (throws
  /// ConfigError under "on" when they cannot, cuda_graph_policy.h) and, when they may, moves this
  /// thread's work on the device to the capture's stream. Call once, after the model and the
  /// optimizer are built and before anything else runs on the device.
  void prepare_cuda_graphs(const CudaGraphFacts& facts);
  /// [all ranks] One optimizer step over an accumulation window of `window_length` micro-batches
  /// taken from `next` (epoch `epoch`, 0-based): trains each, agrees with the other ranks once
  /// (item count, non-finite loss, and `control_flags`, this rank's reasons to stop or save
  /// (WindowFlag): one collective, fused with the logging window's loss sums on logging steps),
  /// updates the weights unless the window was poisoned (nan_policy = "skip") or had no item, then
  /// advances (ParameterUpdate::advance: the schedule, the step count, the EMA). An empty
  /// micro-batch (every sample skipped) still joins the window's all-reduce. Under
  /// run.cuda_graphs the window's phases 2-3 and 5 may run as one graph replay (4 on the host
  /// after it), with the same numbers.
  /// Throws tp::Error for a non-finite loss under nan_policy = "stop" (data-parallel: on every
  /// rank at once) and for an out-of-memory error it cannot split (train.on_oom).
  StepOutcome optimizer_step(const MicroBatchFeed& next, int64_t window_length, int64_t epoch, uint32_t control_flags);

  /// Optimizer steps skipped for a non-finite loss (nan_policy = "skip").
  int64_t skipped_steps() const noexcept { return skipped_steps_; }
  /// runtime.toml's [cuda_graphs] table when it changed since the last call (at start-up, after
  /// a capture, after "auto" chose); nothing otherwise.
  std::optional<std::string> take_cuda_graph_report();

  /// Checkpoint: the micro-batch splits out-of-memory errors left (train.on_oom = "split").
  void save_state(CheckpointContents& into) const;
  /// Resume: the same, from `from`; a captured step is captured anew (the update's state it
  /// wrote into is replaced). Throws tp::Error for splits < 1.
  void load_state(const LoadedCheckpoint& from);

 private:
  /// What one accumulation window has seen on the host: reset by one assignment at each window's
  /// start (a replay sets what its capture found).
  struct WindowState {
    at::Tensor correction;          ///< data-parallel: the window's gradient correction (agree_on_window)
    std::string first_non_finite;   ///< where the window's loss first became non-finite, for the error
    /// nan_policy = "skip": the model's buffers as the window began (after their broadcast), put
    /// back when it is skipped, since its forwards moved them (BatchNorm statistics)
    std::vector<at::Tensor> buffers_before;
    int64_t batches = 0;            ///< non-empty pieces of micro-batches trained so far
    int64_t backwards = 0;          ///< pieces whose backward completed (the gradients hold them)
    const char* piece_phase = "forward"; ///< where the current piece is, for an out-of-memory report
    bool split = false;             ///< this rank doubled splits_ in this window
    bool poisoned = false;          ///< a non-finite loss
    bool empty = false;             ///< no item in the window on any rank: no update
    bool log = false;               ///< a logging step: measure the gradient norm, carry the meters' sums
    bool capturing = false;         ///< the phases run under a graph capture: device work only, no timing
  };
  /// The window's loss normaliser on the device, at addresses fixed for the run (a captured
  /// graph reads and writes them in place).
  struct WindowTotals {
    at::Tensor estimate; ///< the divisor every micro-batch's loss is divided by (normalised_loss)
    at::Tensor items;    ///< the items the window's backwards have counted
  };
  /// Under run.cuda_graphs, a window's micro-batches placed on the device and held until the
  /// window is whole: a replay trains all of them at once.
  struct HeldWindow {
    std::vector<NamedTensors> batches;
    std::vector<int64_t> next_indices; ///< each one's index of the batch after it
  };
  /// How a held window's phases 2-3 and 5 run, and whether its eager run is probed for host syncs.
  struct GraphPlan {
    StepCapture::Use use = StepCapture::Use::kEager;
    bool probe = false;
  };

  /* The graph: another way of running phases 2-3 and 5 (step_runner_graphs.cpp) */
  /// How the held window runs: eagerly (no graph, the warm-up, a window a graph cannot replay),
  /// captured and replayed, or replayed.
  GraphPlan plan_graph(const HeldWindow& held, bool complete) const;
  /// 2-3 and 5 of a complete held window as one replay, captured first under kCapture; the
  /// window's host state is then what the capture found.
  void run_graph(StepCapture::Use use, const HeldWindow& held, int64_t window_length, StepPosition& at);

  /* Phases of a step */
  /// 6. Advance (ParameterUpdate::advance), and on logging steps the update statistics.
  void finish_step(StepOutcome& outcome);
  /// 1. A fetched micro-batch on the device, through the batch transforms (at.batch: the index
  /// of the batch after it).
  NamedTensors place(NamedTensors cpu_batch, const StepPosition& at);
  /// 2-3 for one micro-batch already placed (empty: every sample was skipped).
  void train_micro_batch(const NamedTensors& batch, const AccumulationWindow& window, const StepPosition& at);
  /// 2-3 for each micro-batch of a held window (`batches`: the held ones or a capture's static
  /// copies), leaving `at` at the last one.
  void train_held(const std::vector<NamedTensors>& batches, const std::vector<int64_t>& next_indices,
                  int64_t window_length, StepPosition& at);
  /// What each micro-batch starts with: its timing window, the reducer's sync flag, and at the
  /// window's first the buffers' broadcast and the device item count zeroed.
  void begin_micro_batch(const AccumulationWindow& window, int64_t step);
  /// 2-3 for each piece of the placed micro-batch (the whole batch unless it was split).
  void train_pieces(const NamedTensors& batch, const AccumulationWindow& window, const StepPosition& at);
  /// 2-3 for one piece: forward, the normalised loss, the non-finite check, backward (which
  /// all-reduces when `sync`), then its items and loss are counted.
  void train_piece(const NamedTensors& piece, const AccumulationWindow& window, bool sync, const StepPosition& at);
  /// 2. Forward: the model, then the loss, under autocast; a failure names the component that failed, the step
  /// and the fields it received (batch_error.h).
  LossTerms forward(const NamedTensors& batch, const StepPosition& at);
  at::Tensor normalised_loss(const LossTerms& terms, const AccumulationWindow& window);
  void check_finite(const at::Tensor& sum, const StepPosition& at);
  void backward(const at::Tensor& loss, bool sync);
  /// An error out of a piece of `samples` samples: rethrows anything but running out of memory,
  /// throws the out-of-memory report under on_oom = "fail" or where splitting cannot recover
  /// exactly; otherwise drops what the piece left, doubles splits_ and returns (the caller retries).
  void recover_from_out_of_memory(const std::exception_ptr& error, int64_t samples, bool sync, const StepPosition& at);
  /// Data-parallel: after some rank split this window, every rank takes the largest split.
  void agree_on_splits();
  void join_all_reduce(const AccumulationWindow& window);
  /// 4-5 once per complete window, timed as the optimizer phase: the agreement, then the update or
  /// skip (`replayed`: the update ran in the graph).
  void close_window(uint32_t control_flags, bool replayed, const StepPosition& at, StepOutcome& outcome);
  /// 4. Agree: the window's one collective: `control_flags` and the step's own flags ORed over ranks,
  /// the item count (and on a logging step the meters' window sums) summed. Returns the flags.
  uint32_t agree_on_window(uint32_t control_flags, const StepPosition& at);
  /// 5. Update, or skip a poisoned or empty window (a poisoned one's buffers put back as it began).
  bool update_or_skip(const StepPosition& at);
  /// 5. The update with this window's gradient correction (ParameterUpdate::apply).
  void update_parameters();
  /// nan_policy = "skip": the model's buffers as the poisoned window began (WindowState::buffers_before).
  void put_back_buffers();
  /// dist.broadcast_buffers: rank 0's buffers (BatchNorm statistics) to all ranks, before a
  /// window's first forward, as Python's DDP does. Nothing for a model without buffers.
  void sync_buffers();

  const RunConfig& config_;
  RunComponents& parts_;
  const std::vector<StateTensor>& model_state_;
  BuiltOptimizer& optim_;
  const BatchPlacement& placement_;
  TrainMeters& meters_;
  Logger& log_;
  Collectives& collectives_;
  std::unique_ptr<GradientReducer> reducer_; ///< build_gradient_reducer(); does nothing for a single process
  ParameterUpdate& update_; ///< 5-6: the update and what advances with the step; owns the fp16 scaler
  std::unique_ptr<StepCapture> capture_; ///< run.cuda_graphs when allowed; null: every step eager
  std::optional<std::string> graph_report_; ///< runtime.toml's [cuda_graphs] table, not yet taken
  WindowTotals totals_;
  WindowState window_;
  int64_t splits_ = 1;           ///< pieces per micro-batch (train.on_oom = "split"), checkpointed
  int64_t skipped_steps_ = 0;
};

}  // namespace tp
