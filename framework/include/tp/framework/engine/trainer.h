// The training loop (house style 1.7 steps 6-9): fit() runs epochs of optimizer steps, evaluates,
// reports to history/progress/callbacks and writes checkpoints. Its header is its table of
// contents (flashlight's Trainer.h).
//
// Example:
//   Trainer trainer(config, components, device, logger, run_dir);
//   FitSummary summary = trainer.fit();
#pragma once

#include <c10/core/Device.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/amp/grad_scaler.h"
#include "tp/framework/amp/precision.h"
#include "tp/framework/callbacks/history.h"
#include "tp/framework/callbacks/progress.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/config/run_config.h"
#include "tp/framework/data/data_loader.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/optim/lr_scheduler.h"
#include "tp/framework/optim/optimizer_factory.h"
#include "tp/framework/util/log.h"

namespace tp {

/// Named scalar values ("val/loss", "val/accuracy").
using Scalars = std::vector<std::pair<std::string, double>>;

/// What fit() reports at the end.
struct FitSummary {
  int64_t epochs = 0;
  int64_t steps = 0;
  Scalars last_eval;           ///< the final evaluation
  std::string monitor;         ///< checkpoint.monitor
  double best = 0.0;           ///< best monitored value
  double seconds = 0.0;        ///< wall time of fit()
  bool stopped_early = false;  ///< a callback requested stop
  int64_t skipped_steps = 0;   ///< optimizer steps skipped for a non-finite loss (nan_policy = "skip")
};

class Trainer {
 public:
  /// `parts` must outlive the trainer. Only rank 0 writes files (history, checkpoints).
  Trainer(const RunConfig& config, RunComponents& parts, c10::Device device, Logger& logger,
          std::filesystem::path run_dir, int rank = 0, int world_size = 1);
  ~Trainer();
  Trainer(const Trainer&) = delete; // Disabling meaningless Trainer copy.
  Trainer& operator=(const Trainer&) = delete;

  /// Trains for train.epochs epochs (evaluating every eval.every) and returns the summary.
  FitSummary fit();
  /// Evaluates the current model on the validation split: "val/loss" and "val/<metric>".
  Scalars evaluate();
  /// Continues from `checkpoint` (call before fit()): model, optimizer, schedule, grad scaler,
  /// CPU RNG, step/epoch counters, the position inside the epoch, best value and history.
  /// Resuming is exact: the rest of the run is the same as if it had never stopped.
  void resume_from(const LoadedCheckpoint& checkpoint);

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
  void train_step(NamedTensors& batch, const Window& window);
  void optimizer_step();
  void end_epoch(int64_t epoch, const Scalars& eval);
  void save_checkpoints(int64_t epoch, const Scalars& eval);
  /// Writes last.pt at the current position (mid-epoch), e.g. on SIGTERM or a callback request.
  void save_position();
  CheckpointContents checkpoint_contents(int64_t resume_epoch, int64_t resume_batch) const;
  uint32_t dispatch(int32_t kind, const Scalars& scalars, const std::string& message = "");
  /* Stateless training helpers */
  NamedTensors to_device(NamedTensors batch) const;
  double read_window_loss();

  const RunConfig& config_;
  RunComponents& parts_;
  c10::Device device_;
  Logger& log_;
  std::filesystem::path run_dir_;
  int rank_, world_size_;

  std::vector<StateTensor> model_state_;
  BuiltOptimizer optim_;
  Precision precision_;
  GradScaler scaler_;
  std::unique_ptr<LrScheduler> scheduler_;
  std::unique_ptr<DataLoader> train_loader_, val_loader_;
  History history_;
  Progress progress_;

  int64_t step_ = 0;       ///< optimizer steps taken
  int64_t start_epoch_ = 0, start_batch_ = 0; ///< where fit() begins (resume)
  int64_t epoch_ = 0;      ///< current epoch (0-based)
  at::Tensor window_loss_sum_, window_count_; ///< since the last log step, on device (no sync)
  at::Tensor epoch_loss_sum_, epoch_count_;
  at::Tensor window_estimate_, window_items_; ///< loss normaliser of the current accumulation window
  double best_;
  bool stop_requested_ = false;
  bool window_poisoned_ = false; ///< nan_policy = "skip": this window saw a non-finite loss
  int64_t skipped_steps_ = 0;
};

}  // namespace tp
