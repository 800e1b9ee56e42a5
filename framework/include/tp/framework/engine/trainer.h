// The training loop (docs/architecture.md, run steps 6-9): fit() runs epochs of optimizer steps, evaluates,
// reports to history/progress/callbacks and writes checkpoints. This header is the whole of it a
// command sees: the roles the loop drives (StepRunner, ParameterUpdate, RunControl, Evaluator,
// TrainMeters, EventDispatcher, ...) are engine-private, held by Trainer::Impl
// (framework/src/engine/training/trainer_impl.h, the loop's table of contents; docs/engine.md).
//
// Example:
//   Trainer trainer(config, components, device, logger, run_dir);
//   FitSummary summary = trainer.fit();
// Data-parallel (docs/distributed.md): pass the run's Collectives over the joined DistContext
// (make_collectives); every rank runs the same calls, gradients and evaluations are reduced, and
// only rank 0 writes.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/config/run_config.h"
#include "tp/framework/dist/collectives.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/engine/scalars.h"
#include "tp/framework/util/log.h"

namespace tp {

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
  int64_t scaler_skipped_steps = 0; ///< optimizer steps the fp16 grad scaler skipped (inf/NaN gradients)
};

/// A role's part of a checkpoint: `save` writes its fields, `load` reads the same ones back.
struct StateRole {
  std::string name;
  std::function<void(CheckpointContents&)> save;
  std::function<void(const LoadedCheckpoint&)> load;
};

class Trainer {
 public:
  /// `parts` must outlive the trainer. `collectives` (the run's, make_collectives; null = a single
  /// process on `device`, every collective the identity) becomes the trainer's; over a process
  /// group, the constructor broadcasts rank 0's parameters and buffers, and every public call is
  /// collective: all ranks must make it. Only rank 0 writes files (history, checkpoints, plots)
  /// and prints progress.
  Trainer(const RunConfig& config, RunComponents& parts, c10::Device device, Logger& logger,
          std::filesystem::path run_dir, std::unique_ptr<Collectives> collectives = nullptr);
  ~Trainer();
  Trainer(const Trainer&) = delete; // Disabling meaningless Trainer copy.
  Trainer& operator=(const Trainer&) = delete;

  /// Trains for train.epochs epochs, evaluating and saving on the eval/checkpoint strategies,
  /// and returns the summary. train.fast_dev_run: one optimizer step, one evaluation batch, no
  /// files. train.overfit_batches = N: every epoch trains on the first N batches (unshuffled) and
  /// evaluates on the same samples. Callback requests are honoured as the table in
  /// plugin_api/include/tp/iface/callback.h says.
  FitSummary fit();
  /// Continues from `checkpoint` (call before fit()): model, optimizer, schedule, grad scaler,
  /// CPU RNG, step/epoch counters, the position inside the epoch, best value and history.
  /// Resuming is exact: the rest of the run is the same as if it had never stopped. Data-parallel:
  /// every rank loads the same checkpoint, then rank 0's weights are broadcast.
  void resume_from(const LoadedCheckpoint& checkpoint);
  /// The run's identity (checkpoint/run_identity.h), carried by every checkpoint it saves; "" until
  /// set. resume_from() takes the checkpoint's, where it has one.
  const std::string& run_id() const noexcept;
  /// Whether fit() has nothing left to train: the start position is past the last epoch, or
  /// early stopping ended the run (a finished run resumed, as a requeued job does).
  bool finished() const;
  /// Sets the identity for the checkpoints saved from now on (host train: a fresh run's new one).
  void set_run_id(std::string id);
  /// Writes runtime.toml (the effective settings, data.decode's and run.cuda_graphs' choices) and
  /// keeps it current from here on. `host train` calls it once the run is assembled and any
  /// checkpoint restored, so a start-up that fails never rewrites the record of the run that
  /// trained. [all ranks; rank 0 writes]
  void record_runtime();
  /// Every part of a checkpoint, in save order (ARCH-20, which names the entries the Trainer still
  /// writes for a role rather than the role itself). A checkpoint is the
  /// union of what their `save`s write (the position role writes `resume`, where a run
  /// continuing from it starts); resume_from() runs their `load`s.
  std::vector<StateRole> state_roles(ResumePosition resume = {});
  /// What a checkpoint written now holds, resuming at `resume` (a sync point on CUDA).
  CheckpointContents checkpoint_contents(ResumePosition resume);

 private:
  class Impl; // engine-private (trainer_impl.h): the roles, the model state, the loop's position
  std::unique_ptr<Impl> impl_;
};

}  // namespace tp
