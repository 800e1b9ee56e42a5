// One optimizer step, whole (ARCH-15): the accumulation window's micro-batches (fetch, forward
// under autocast, the window's exact loss normalisation, the non-finite-loss policy, backward
// with the data-parallel gradient all-reduce), the ranks' one agreement, the update (unscale,
// clip, step; the fp16 grad scaler), then what advances with every step: the schedule, the step
// count and the EMA of the weights. The loop (train_loop.cpp) calls optimizer_step() once per
// step and reads one StepOutcome; these two files are the training step (docs/engine.md).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "tp/framework/amp/grad_scaler.h"
#include "tp/framework/amp/precision.h"
#include "tp/framework/config/run_config.h"
#include "tp/framework/engine/batch_placement.h"
#include "tp/framework/engine/finite_weights.h"
#include "tp/framework/engine/run_control.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/engine/train_meters.h"
#include "tp/framework/engine/weight_average.h"
#include "tp/framework/optim/lr_scheduler.h"
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

/// What a logging step records about the updates since the previous one (history keys in
/// brackets); the same on every rank (gradients are all-reduced).
struct UpdateStats {
  double grad_norm = std::numeric_limits<double>::quiet_NaN(); ///< [train/grad_norm] the logged step's global
                                                                  ///< gradient norm before clipping (NaN: none measured)
  double clipped_fraction = 0;  ///< [train/clipped_fraction] steps whose norm exceeded train.max_grad_norm
  bool scaler_enabled = false;  ///< fp16: the two amp/* values below are meaningful
  double scale = 0;             ///< [amp/scale] the fp16 grad scaler's scale
  int64_t scaler_skipped = 0;   ///< [amp/skipped_steps] steps the fp16 scaler skipped, whole run
};

/// What one optimizer step did.
struct StepOutcome {
  int64_t micro_batches = 0; ///< micro-batches fetched and trained
  bool complete = false;     ///< false: the loader ran dry inside the window (no update, no step counted)
  bool updated = false;      ///< the weights changed (not skipped for a non-finite loss, not an empty window)
  double lr = std::numeric_limits<double>::quiet_NaN(); ///< the lr the step trained with
  uint32_t agreed = 0;       ///< the window's WindowFlag bits, ORed over ranks
  /// On logging steps (train.log_every_steps): the logging window's update statistics (reading
  /// them is a host sync, on those steps only); nothing otherwise.
  std::optional<UpdateStats> update_stats;
};

class StepRunner {
 public:
  /// Every reference must outlive the runner; `optim` and `model_state` may still be empty here
  /// (the Trainer fills them, then calls build_gradient_reducer(), before the first step).
  StepRunner(const RunConfig& config, RunComponents& parts, const std::vector<StateTensor>& model_state,
             BuiltOptimizer& optim, const BatchPlacement& placement, TrainMeters& meters, Logger& log,
             Collectives& collectives);
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  /// [all ranks] (Re)builds the gradient all-reduce over the model's trainable parameters (a
  /// collective shape check under data-parallel training) and logs its buckets. Call once the
  /// model is placed, and again when frozen groups join.
  void build_gradient_reducer();
  /// [all ranks] One optimizer step over an accumulation window of `window_length` micro-batches
  /// taken from `next` (epoch `epoch`, 0-based): trains each, agrees with the other ranks once
  /// (item count, non-finite loss, `control`'s flags: one collective, fused with the logging
  /// window's loss sums on logging steps), updates the weights unless the window was poisoned
  /// (nan_policy = "skip") or had no item, then steps the active schedule, counts the step and
  /// updates the EMA. An empty micro-batch (every sample skipped) still joins the window's
  /// all-reduce. Throws tp::Error for a non-finite loss under nan_policy = "stop" (data-parallel:
  /// on every rank at once) and for an out-of-memory error it cannot split (train.on_oom).
  StepOutcome optimizer_step(const MicroBatchFeed& next, int64_t window_length, int64_t epoch, RunControl& control);

  /* What advances with every optimizer step */
  /// Optimizer steps taken (a resumed run's included).
  int64_t step() const noexcept { return step_; }
  /// The [schedule] (stepped after every optimizer step until SWALR takes over).
  void set_schedule(std::unique_ptr<LrScheduler> schedule) { schedule_ = std::move(schedule); }
  LrScheduler& schedule() noexcept { return *schedule_; }
  /// [swa] SWALR from swa.start_epoch on: it owns the lr from then (stepped per epoch by the
  /// trainer), and the [schedule] stops advancing.
  void start_swa_schedule(std::unique_ptr<LrScheduler> swa_schedule) { swa_schedule_ = std::move(swa_schedule); }
  LrScheduler* swa_schedule() noexcept { return swa_schedule_.get(); }
  /// The schedule that owns the lr now: SWALR during SWA epochs, else [schedule].
  LrScheduler& active_schedule() noexcept { return swa_schedule_ ? *swa_schedule_ : *schedule_; }
  /// [ema]: updated every ema.every_steps steps; null when off.
  void set_ema(std::unique_ptr<WeightAverage> ema) { ema_ = std::move(ema); }
  WeightAverage* ema() noexcept { return ema_.get(); }
  const WeightAverage* ema() const noexcept { return ema_.get(); }

  Precision precision() const noexcept { return precision_; }
  /// The fp16 grad scaler (disabled otherwise).
  GradScaler& scaler() noexcept { return scaler_; }
  const GradScaler& scaler() const noexcept { return scaler_; }
  /// Optimizer steps skipped for a non-finite loss (nan_policy = "skip").
  int64_t skipped_steps() const noexcept { return skipped_steps_; }
  /// Optimizer steps the fp16 grad scaler skipped (inf/NaN gradients), this process's run.
  int64_t scaler_skipped_steps() const noexcept { return scaler_skipped_; }
  /// Whether the weights are finite after the last update, and the first step whose update left
  /// them non-finite (finite_weights.h).
  const FiniteWeightsWatch& weights_watch() const noexcept { return weights_watch_; }
  /// Pieces each micro-batch is cut into (train.on_oom = "split" doubles it after an
  /// out-of-memory error; 1 otherwise).
  int64_t micro_batch_splits() const noexcept { return splits_; }

  /// Checkpoint: the step count, the grad scaler, the micro-batch splits, the schedules, the EMA.
  void save_state(CheckpointContents& into) const;
  /// Resume: the same, from `from`. Throws tp::Error for splits < 1 or an EMA that does not fit.
  void load_state(const LoadedCheckpoint& from);


 private:
  /* Phases of optimizer_step */
  /// 1-3 for one micro-batch: place it, run the batch transforms, forward and backward.
  void train_micro_batch(NamedTensors& cpu_batch, const AccumulationWindow& window, const StepPosition& at);
  void begin_micro_batch(const AccumulationWindow& window, int64_t step);
  /// 2-3 for each piece of the placed micro-batch (the whole batch unless it was split).
  void train_pieces(const NamedTensors& batch, const AccumulationWindow& window, const StepPosition& at);
  /// 2-3 for one piece: forward, the normalised loss, the non-finite check, backward (which
  /// all-reduces when `sync`), then its items and loss are counted.
  void train_piece(const NamedTensors& piece, const AccumulationWindow& window, bool sync, const StepPosition& at);
  /// 2. The model, then the loss, under autocast; a failure names the component that failed, the step
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
  /// 4. The window's one collective: `control_flags` and the step's own flags ORed over ranks,
  /// the item count (and on a logging step the meters' window sums) summed. Returns the flags.
  uint32_t agree_on_window(uint32_t control_flags, const StepPosition& at);
  /// 5. Update, or skip a poisoned or empty window.
  bool update_or_skip(const StepPosition& at);
  void update();
  /// 6. The logging window's update statistics (a host sync); restarts the window.
  UpdateStats read_update_stats();
  /// 4b. The global gradient norm of `grads` (torch.nn.utils.clip_grad_norm_'s, foreach), clipped
  /// to train.max_grad_norm when that is set. No host sync: the norm stays on the device.
  void clip_by_norm(const std::vector<at::Tensor>& grads);
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
  Precision precision_;
  GradScaler scaler_;
  at::Tensor window_estimate_, window_items_; ///< loss normaliser of the current window, on device
  at::Tensor correction_;        ///< data-parallel: the window's gradient correction (agree_on_window)
  int64_t step_ = 0;             ///< optimizer steps taken
  std::unique_ptr<LrScheduler> schedule_, swa_schedule_;
  std::unique_ptr<WeightAverage> ema_;
  FiniteWeightsWatch weights_watch_; ///< the weights after each update, on the device
  std::string first_non_finite_; ///< where this window's loss first became non-finite, for the error
  int64_t window_batches_ = 0;   ///< non-empty pieces of micro-batches in this window so far
  int64_t window_backwards_ = 0; ///< pieces of this window whose backward completed (gradients hold them)
  int64_t splits_ = 1;           ///< pieces per micro-batch (train.on_oom = "split")
  bool split_this_window_ = false; ///< this rank doubled splits_ in the current window
  const char* piece_phase_ = "forward"; ///< where the current piece is, for an out-of-memory report
  bool window_poisoned_ = false; ///< this window saw a non-finite loss
  bool window_empty_ = false;    ///< no item in the window on any rank: no update
  int64_t skipped_steps_ = 0;
  /* Update statistics of the logging window (read_update_stats) */
  bool log_window_ = false;      ///< this window's step is a logging step: measure its gradient norm
  at::Tensor grad_norm_;         ///< the last measured norm, on the device
  at::Tensor clipped_steps_;     ///< steps of the logging window whose norm exceeded max_grad_norm
  int64_t clip_checked_steps_ = 0;
  int64_t scaler_skipped_ = 0;
};

}  // namespace tp
