// Trainer's implementation, engine-private (docs/engine.md, "The public surface"): the loop's table
// of contents (flashlight's Trainer.h). The loop lives in train_loop.cpp, and each role it drives
// has a type of its own:
//   StepRunner       one whole optimizer step: micro-batches, AMP, normalisation, NaN policy,
//                    out-of-memory splits, the ranks' agreement, then ParameterUpdate's phases
//   ParameterUpdate  the update (scaler, clipping, optimizer step), the schedules and SWALR, the
//                    step count, the weights' finiteness watch, the EMA and SWA averages
//   RunControl       every reason to stop or save, agreed once per step
//   Evaluator        evaluation and its reactions: plateau schedule, monitor, early stopping
//   TrainMeters      loss, throughput and step-time meters, read only at log steps
//   EventDispatcher  callback events and their requests
//   BatchPlacement   a batch's way to the device
//   Collectives      every collective, the identity for a single process
//   StepTrace        run.trace_steps: a window of steps recorded as a Chrome trace
// The checkpoint is a loop over state_roles(): 6 of its 11 entries go through the role that owns
// the state, the others are still written by the Trainer (ARCH-20 names them).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/amp/precision.h"
#include "tp/framework/monitor/history.h"
#include "tp/framework/monitor/progress.h"
#include "tp/framework/monitor/tensorboard_writer.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/checkpoint/checkpoint_manager.h"
#include "tp/framework/config/run_config.h"
#include "tp/framework/data/data_loader.h"
#include "tp/framework/engine/batch_placement.h"
#include "engine/training/event_dispatcher.h"
#include "engine/training/evaluator.h"
#include "engine/training/plot_clock.h"
#include "tp/framework/dist/collectives.h"
#include "engine/setup/provenance.h"
#include "engine/training/run_budget.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/engine/trainer.h"
#include "engine/training/run_control.h"
#include "tp/framework/engine/scalars.h"
#include "engine/training/step_runner.h"
#include "engine/training/step_trace.h"
#include "engine/setup/image_decode_choice.h"
#include "engine/setup/runtime_record.h"
#include "engine/training/train_meters.h"
#include "engine/training/weight_average.h"
#include "tp/framework/optim/lr_scheduler.h"
#include "tp/framework/optim/optimizer_factory.h"
#include "tp/framework/util/log.h"

namespace tp {

/// Where the loop is.
struct LoopPosition {
  int64_t epoch = 0;                  ///< current epoch (0-based)
  ResumePosition start;               ///< where fit() begins (a resumed run starts inside an epoch)
  int64_t last_periodic_save = -1;    ///< the step of the last periodic save
  ResumePosition last_periodic_at;    ///< where that save resumes
  /// Training samples the ranks skipped in the resumed epoch before its saved position: rank 0
  /// holds them (others 0), so a sum over the ranks counts them once; 0 once that epoch ended.
  int64_t skipped_before_resume = 0;
  /// The ranks' skipped training samples of the epoch up to the position the last save wrote.
  int64_t skipped_at_save = 0;
};

class Trainer::Impl {
 public:
  /// As Trainer's constructor (trainer.h).
  Impl(const RunConfig& config, RunComponents& parts, c10::Device device, Logger& logger,
       std::filesystem::path run_dir, std::unique_ptr<Collectives> collectives);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

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
  const std::string& run_id() const noexcept { return run_id_; }
  /// Trainer::finished(): the start position past the last epoch, or early stopping's end.
  bool finished() const {
    return position_.start.epoch >= epochs_ || evaluator_->early_stopping_ended_run(position_.start.epoch).has_value();
  }
  /// Sets the identity for the checkpoints saved from now on (host train: a fresh run's new one).
  void set_run_id(std::string id) { run_id_ = std::move(id); }
  /// Data-parallel: copies rank 0's parameters and buffers to every rank (the initial weights,
  /// a resumed checkpoint's, the best ones loaded at the end). The identity for a single process.
  void broadcast_model();
  /// Trainer::record_runtime: runtime.toml is written from now on.
  void record_runtime();
  /// Every stateful role's part of a checkpoint, in save order (ARCH-20). A checkpoint is the
  /// union of what their `save`s write (the position role writes `resume`, where a run
  /// continuing from it starts); resume_from() runs their `load`s.
  std::vector<StateRole> state_roles(ResumePosition resume = {});
  /// What a checkpoint written now holds, resuming at `resume` (a sync point on CUDA).
  CheckpointContents checkpoint_contents(ResumePosition resume);

 private:
  /* Initializers */
  void init_model();
  void init_schedule();
  /// Data-parallel: same initial weights everywhere, then the gradient all-reduce.
  void init_dist();
  /// run.cuda_graphs: the facts the decision reads (cuda_graph_policy.h); "on" that cannot apply
  /// throws ConfigError here, at start-up.
  void init_cuda_graphs();
  /// runtime.toml again with run.cuda_graphs' table, when the step runner's choice changed.
  void record_cuda_graph_state();
  /// Writes runtime.toml (settings, choices, graph table) once record_runtime() was called.
  void write_runtime_toml();
  /// data.decode's choice for the loaders: logged, and runtime.toml's [decode] table (not for "cpu").
  void record_decode(const DecodeChoice& train, const DecodeChoice* val);
  /* The loop (train_loop.cpp) */
  void train_epoch(int64_t epoch);
  /// A logging step: reads the loss the step's agreement carried (a sync), writes the step
  /// record with the step's `update` statistics and `group_lrs` (the lr each parameter group
  /// trained with; group 0's is the record's `lr`), dispatches STEP_END. Returns the loss.
  double log_step(int64_t epoch, const std::vector<double>& group_lrs, const UpdateStats& update);
  /// Step strategies after an optimizer step: evaluate, then save (so the save can be the best).
  /// `owed`: evaluate whatever the strategy says (a resumed checkpoint's Pending::kStep). A stop
  /// signal during the evaluation abandons it (Pending::kStep) and skips the saves: the caller
  /// then finds RunControl::signal set and calls stop_on_signal.
  void evaluate_and_save_on_steps(int64_t epoch, bool owed = false);
  /// [all ranks] The agreed stop signal (RunControl::signal): saves last.pt at `resume` and
  /// throws Interrupted, which exits 128 + signal.
  [[noreturn]] void stop_on_signal(ResumePosition resume);
  void end_epoch(int64_t epoch);
  /// data.on_bad_sample = "skip": throws tp::Error (exit 1) when no rank loaded a training sample
  /// of `epoch` and some were skipped (`samples`: this rank's loaded ones); else returns the
  /// samples every rank skipped in it. One collective.
  double refuse_epoch_of_bad_samples(int64_t epoch, int64_t samples);
  /// This rank's skipped training samples of the running epoch, those before a resume included.
  int64_t rank_skipped_samples() const;
  /// [all ranks: a collective] The ranks' skipped training samples of the running epoch.
  int64_t skipped_over_ranks();
  /// Evaluates and reacts: callbacks (EVAL_END), early stopping, an "eval" history record when no
  /// epoch record takes the values (eval.strategy = "steps", the final evaluation after SWA); with
  /// `epoch_line_follows` (end_epoch) the epoch's record and line take them.
  /// `trained_in`: the 0-based epoch of the step the evaluation follows, for its record (-1: the
  /// current position's epoch, as for an evaluation inside an epoch). `stoppable` (the loop's
  /// evaluations): a stop signal agreed before it or during it (between batches, agreed in the
  /// passes' header all-reduce) abandons it: nothing is returned, logged or reacted to, and
  /// RunControl::signal holds the signal.
  std::optional<Scalars> run_evaluation(bool epoch_line_follows = false, int64_t trained_in = -1, bool stoppable = false);
  bool due(IntervalStrategy strategy, int64_t every, bool at_epoch_end, int64_t epoch) const;
  /// Sends an event at the current step/epoch/lr; returns the callbacks' requests.
  uint32_t dispatch(int32_t kind, const Scalars& scalars, const std::string& message = "");
  /// The current optimizer step count.
  int64_t step() const noexcept { return update_.step(); }
  /// Redraws plots/*.png (plots.enabled, rank 0) and hands them to TensorBoard
  /// (logging.tensorboard_images), at most once per plots.min_interval_s unless `final` (the end
  /// of fit); a failure is logged, never fatal.
  void draw_plots(bool final = false);
  /* Checkpoints (trainer_checkpoint.cpp) */
  /// What a save writes.
  enum class SaveKind {
    kPeriodic, ///< the checkpoint strategy's files (last.pt, step-N.pt), and best.pt when this step's evaluation qualifies
    kBest,     ///< best.pt alone, when the evaluation taken at this step qualifies
    kPosition  ///< last.pt alone, at the exact position: a signal or a callback's request
  };
  /// The one save path, on every rank: agrees the BatchNorm statistics and the weights' finiteness,
  /// rank 0 writes, every rank settles the write, CHECKPOINT_SAVE names each file. Writes nothing
  /// under train.fast_dev_run, and only kPosition under checkpoint.strategy = "no". `resume` =
  /// where a run resumed from the files continues.
  void save(SaveKind kind, ResumePosition resume);
  /// [all ranks] Before every save: throws tp::Error naming the step whose update first left the
  /// weights non-finite when the weights or an average are inf/NaN on any rank, so no checkpoint
  /// ever holds them (the earlier ones stay the resume point). Cost: one max-abs pass over the
  /// weights and averages, one host read and one agreement per save.
  void refuse_non_finite_weights();
  /// Saves at `resume` when RunControl holds a save request (a callback's), once.
  void save_if_requested(ResumePosition resume);
  /// [all ranks] checkpoint.load_best_at_end: loads best.pt's weights and evaluates them.
  /// Rank 0 reads the file; whether it is there is agreed, so every rank keeps the final
  /// weights together when it is not. Returns whether the best weights were loaded.
  bool load_best();
  /// Logs how many steps the fp16 grad scaler skipped out of `steps`; a warning above
  /// scaler_skip_warning_threshold().
  void report_scaler_skips(int64_t steps) const;
  /// Throws unless every rank resumes at rank 0's (step, epoch, batch).
  void check_same_position();
  /// Data-parallel, before every evaluation and save: the BatchNorm running statistics of the
  /// model and of the averages become rank 0's or the mean over ranks (dist.bn_stats).
  void sync_batchnorm_stats();

  /* Run constants */
  const RunConfig& config_;
  RunComponents& parts_;
  c10::Device device_;
  Logger& log_;
  std::filesystem::path run_dir_;
  std::unique_ptr<Collectives> collectives_; ///< the run's; the identity for a single process
  int rank_, world_size_;
  bool writes_;                 ///< rank 0 and not fast_dev_run: history, checkpoints, plots, TensorBoard
  int64_t epochs_;              ///< train.epochs (1 for fast_dev_run)
  int64_t train_batches_ = 0;   ///< micro-batches per epoch (overfit/fast_dev_run limit applied)
  bool first_batch_checked_ = false; ///< the loss's field contracts held on this process's first batch
  Precision precision_;         ///< amp.precision
  RunBudget budget_;            ///< train.max_steps, train.max_time
  SuspensionNotes suspensions_; ///< each SIGSTOP ... SIGCONT, logged once at the next window
  /* Model and optimizer */
  std::vector<StateTensor> model_state_;
  BuiltOptimizer optim_;
  /// The groups' configured lrs differ ([[optim.param_groups]] lr, optim.layer_decay): only then
  /// do step records carry lr/group<i>. Decided before the schedule scales them (a warm-up from 0
  /// sets every group to 0), and every schedule scales all groups alike.
  bool group_lrs_differ_ = false;
  /* Roles */
  BatchPlacement placement_;
  TrainMeters meters_;
  ParameterUpdate update_; ///< phases 5-6: the update, the schedules, the step count, the averages
  StepRunner steps_;
  EventDispatcher events_;
  RunControl control_;
  std::unique_ptr<DataLoader> train_loader_;
  std::unique_ptr<Evaluator> evaluator_;
  History history_;
  TensorBoardWriter tensorboard_; ///< [logging] tensorboard: mirrors history_, plus config, hparams, plots
  PlotClock plot_clock_;          ///< when draw_plots last drew (plots.min_interval_s)
  Progress progress_;
  StepTrace trace_;
  CheckpointManager checkpoints_;
  Provenance provenance_; ///< what made this run: runtime.toml, every checkpoint, --resume's check
  std::string run_id_;    ///< the run's identity: every checkpoint carries it (run_identity.h)
  RuntimeRecord runtime_;  ///< runtime.toml: settings, choices, graph table (empty: this process writes none)
  LoopPosition position_;
};

}  // namespace tp
