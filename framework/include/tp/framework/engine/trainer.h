// The training loop (house style 1.7 steps 6-9): fit() runs epochs of optimizer steps, evaluates,
// reports to history/progress/callbacks and writes checkpoints. Its header is its table of
// contents (flashlight's Trainer.h).
//
// Example:
//   Trainer trainer(config, components, device, logger, run_dir);
//   FitSummary summary = trainer.fit();
// Data-parallel (docs/distributed.md): pass the joined DistContext; every rank runs the same
// calls, gradients and evaluations are reduced, and only rank 0 writes.
#pragma once

#include <c10/core/Device.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/amp/grad_scaler.h"
#include "tp/framework/amp/precision.h"
#include "tp/framework/callbacks/early_stopping.h"
#include "tp/framework/callbacks/history.h"
#include "tp/framework/callbacks/progress.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/checkpoint/checkpoint_manager.h"
#include "tp/framework/config/run_config.h"
#include "tp/framework/data/data_loader.h"
#include "tp/framework/engine/nan_policy.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/optim/lr_scheduler.h"
#include "tp/framework/optim/optimizer_factory.h"
#include "tp/framework/profile/training_report.h"
#include "tp/framework/util/log.h"

namespace tp {

class DistContext;
class GradSync;

/// Named scalar values ("val/loss", "val/accuracy").
using Scalars = std::vector<std::pair<std::string, double>>;

/// What fit() reports at the end.
struct FitSummary {
  int64_t epochs = 0;
  int64_t steps = 0;
  Scalars last_eval;           ///< the final evaluation
  std::string monitor;         ///< checkpoint.monitor
  double best = 0.0;           ///< best monitored value (NaN when nothing was evaluated)
  double seconds = 0.0;        ///< wall time of fit()
  bool stopped_early = false;  ///< early stopping or a callback ended training before train.epochs
  std::string stop_reason;     ///< why, when stopped_early
  bool loaded_best = false;    ///< checkpoint.load_best_at_end: last_eval is the best checkpoint's
  int64_t skipped_steps = 0;   ///< optimizer steps skipped for a non-finite loss (nan_policy = "skip")
};

class Trainer {
 public:
  /// `parts` must outlive the trainer. `dist` (null = a single process, no collectives) must
  /// outlive it too; with it, the constructor broadcasts rank 0's parameters and buffers, and
  /// every public call is collective: all ranks must make it. Only rank 0 writes files
  /// (history, checkpoints, plots) and prints progress.
  Trainer(const RunConfig& config, RunComponents& parts, c10::Device device, Logger& logger,
          std::filesystem::path run_dir, DistContext* dist = nullptr);
  ~Trainer();
  Trainer(const Trainer&) = delete; // Disabling meaningless Trainer copy.
  Trainer& operator=(const Trainer&) = delete;

  /// Trains for train.epochs epochs, evaluating and saving on the eval/checkpoint strategies,
  /// and returns the summary. train.fast_dev_run: one optimizer step, one evaluation batch, no
  /// files. train.overfit_batches = N: every epoch trains on the first N batches (unshuffled) and
  /// evaluates on the same samples.
  FitSummary fit();
  /// Evaluates the current model on the validation split: "val/loss" and "val/<metric>".
  Scalars evaluate();
  /// Continues from `checkpoint` (call before fit()): model, optimizer, schedule, grad scaler,
  /// CPU RNG, step/epoch counters, the position inside the epoch, best value and history.
  /// Resuming is exact: the rest of the run is the same as if it had never stopped. Data-parallel:
  /// every rank loads the same checkpoint, then rank 0's weights are broadcast.
  void resume_from(const LoadedCheckpoint& checkpoint);
  /// Data-parallel: copies rank 0's parameters and buffers to every rank (after loading weights
  /// outside the trainer, e.g. `host eval`). No-op for a single process.
  void broadcast_model();

 private:
  /* Initializers */
  void init_model();
  void init_schedule();
  /* Stateful training helpers */
  /// Where a micro-batch sits in its gradient-accumulation window.
  struct Window {
    int64_t length; ///< micro-batches in this window (the epoch's last one may be short)
    bool first;
    bool last;
  };
  void train_epoch(int64_t epoch);
  /// One micro-batch; an empty `batch` (every sample skipped) runs no forward, but on the
  /// window's last micro-batch under data-parallel training it still joins the gradient
  /// all-reduce with a zero loss.
  void train_step(NamedTensors& batch, const Window& window);
  void forward_backward(NamedTensors& batch, const Window& window);
  void backward(const at::Tensor& loss, const Window& window);
  void optimizer_step();
  /// After each optimizer step: the step record, step-strategy evaluation and saves.
  void after_optimizer_step(int64_t epoch, int64_t done);
  void end_epoch(int64_t epoch);
  /// Evaluates and reacts: plateau schedule, callbacks, early stopping, history, plots.
  Scalars run_evaluation();
  /// Saves through the checkpoint manager: `periodic` (last/step-N) and/or best by the last
  /// evaluation when it was taken at this step. (resume_epoch, resume_batch) = where to continue.
  void save(bool periodic, int64_t resume_epoch, int64_t resume_batch);
  /// checkpoint.load_best_at_end: loads best.pt's weights and evaluates them.
  void load_best();
  /// Redraws plots/*.png (plots.enabled, rank 0); a failure is logged, never fatal.
  void draw_plots();
  bool due(const std::string& strategy, int64_t every, bool at_epoch_end, int64_t epoch) const;
  /// Writes last.pt at (resume_epoch, resume_batch), e.g. on SIGTERM or a callback request.
  void save_position(int64_t resume_epoch, int64_t resume_batch);
  /// A callback asked to stop: the loop ends at the next window boundary.
  void request_stop();
  /// Requests of an event that are honoured at the next window boundary (callback.h's table).
  void defer(uint32_t requests);
  CheckpointContents checkpoint_contents(int64_t resume_epoch, int64_t resume_batch) const;
  uint32_t dispatch(int32_t kind, const Scalars& scalars, const std::string& message = "");
  /* Stateless training helpers */
  NamedTensors to_device(NamedTensors batch) const;
  /// Applies run.channels_last / cudnn_benchmark / tf32 and writes <run dir>/runtime.toml.
  void apply_switches();
  double read_window_loss();
  /* Data-parallel helpers (trainer_dist.cpp); each is a no-op, or the identity, without dist_ */
  void init_dist();
  /// ORs callback requests over ranks, so a stop or save one rank asks for happens on all.
  uint32_t agree(uint32_t requests);
  /// At a window's end: global item count and whether any rank saw a non-finite loss or a stop
  /// signal (one small all-reduce). Returns the gradient correction factor estimate / actual.
  at::Tensor agree_on_window();
  /// (sum, count) read to the host; data-parallel: summed over ranks (a collective).
  std::pair<double, double> global_sums(const at::Tensor& sum, const at::Tensor& count);
  /// Sums the running-loss accumulators into rank 0's (others zero), so a checkpoint holds the
  /// global values and later sums stay right.
  void gather_running_loss();
  /// Sums each metric's state tensors over ranks, in place (before compute()).
  void reduce_eval(at::Tensor& loss_sum, at::Tensor& count);
  /// dist.broadcast_buffers: rank 0's buffers (BatchNorm statistics) to all ranks, before a
  /// window's first forward, as Python's DDP does. Nothing for a model without buffers.
  void sync_buffers();
  /// Throws unless every rank resumes at rank 0's (step, epoch, batch).
  void check_same_position();

  const RunConfig& config_;
  RunComponents& parts_;
  c10::Device device_;
  Logger& log_;
  std::filesystem::path run_dir_;
  DistContext* dist_;           ///< null: a single process
  int rank_, world_size_;
  std::unique_ptr<GradSync> grad_sync_; ///< data-parallel only
  int agreed_signal_ = 0;       ///< data-parallel: a stop signal some rank saw (0 = none)
  bool writes_;                 ///< rank 0 and not fast_dev_run: history, checkpoints, plots
  int64_t epochs_;              ///< train.epochs (1 for fast_dev_run)
  int64_t train_batches_ = 0;   ///< micro-batches per epoch (overfit/fast_dev_run limit applied)
  int64_t eval_batches_ = 0;    ///< evaluation batch limit; 0 = the whole split

  std::vector<StateTensor> model_state_;
  BuiltOptimizer optim_;
  Precision precision_;
  GradScaler scaler_;
  std::unique_ptr<LrScheduler> scheduler_;
  std::unique_ptr<DataLoader> train_loader_, val_loader_;
  History history_;
  Progress progress_;
  CheckpointManager checkpoints_;
  EarlyStopping early_stopping_;

  int64_t step_ = 0;       ///< optimizer steps taken
  int64_t start_epoch_ = 0, start_batch_ = 0; ///< where fit() begins (resume)
  int64_t epoch_ = 0;      ///< current epoch (0-based)
  at::Tensor window_loss_sum_, window_count_; ///< since the last log step, on device (no sync)
  at::Tensor epoch_loss_sum_, epoch_count_;
  at::Tensor window_estimate_, window_items_; ///< loss normaliser of the current accumulation window
  Scalars last_eval_;
  int64_t last_eval_step_ = -1, last_save_step_ = -1;
  std::optional<double> monitor_value_; ///< checkpoint.monitor in the evaluation at last_eval_step_
  bool stop_requested_ = false;
  std::string stop_reason_;
  /// Throughput meter since the last log step: data-wait seconds, samples, wall-clock start.
  double window_wait_s_ = 0.0, epoch_wait_s_ = 0.0;
  int64_t window_samples_ = 0, epoch_samples_ = 0, window_steps_ = 0;
  std::chrono::steady_clock::time_point window_start_, epoch_start_;
  bool window_poisoned_ = false; ///< nan_policy = "skip": this window saw a non-finite loss
  int64_t window_batches_ = 0;   ///< non-empty micro-batches in this window so far
  bool window_empty_ = false;    ///< the window had no item (on any rank): no update
  NanChecks nan_checks_;         ///< where a non-finite loss is looked for
  uint32_t pending_requests_ = 0; ///< deferred callback requests, agreed at the window's end
  uint32_t window_requests_ = 0;  ///< those requests once agreed, honoured after the step
  bool save_requested_ = false;   ///< an EVAL_END/EPOCH_END save request, honoured by the caller
  int64_t skipped_steps_ = 0;
  TrainingReport report_; ///< step-time split, peak memory, TFLOP/s (docs/profiling.md)
};

}  // namespace tp
