// Evaluation on the validation split and its reactions: the plateau schedule, the monitored
// value the checkpoints rank by, and early stopping. It keeps the last result and the step it
// was taken at, so a save can tell whether an evaluation describes the weights it writes.
// A feature that evaluates other weights (an EMA copy) lands here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tp/framework/monitor/early_stopping.h"
#include "tp/framework/config/run_config.h"
#include "tp/framework/data/data_loader.h"
#include "tp/framework/engine/batch_placement.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/engine/scalars.h"
#include "engine/training/weight_average.h"
#include "tp/framework/optim/lr_scheduler.h"

namespace tp {

class Collectives;

class Evaluator {
 public:
  /// An evaluation a stop signal abandoned, which the resumed run owes first (a checkpoint's
  /// eval_pending, checkpoint.h).
  enum class Pending : int64_t {
    kNone = 0,
    kStep = 1,     ///< eval.strategy = "steps": the evaluation after the checkpoint's step
    kEpochEnd = 2, ///< the epoch end's (the checkpoint stands at its epoch's last batch, SWA's fold done)
  };

  /// `loader` null: the run has no evaluation (enabled() is false). `batches` > 0 limits each
  /// evaluation to that many batches (overfit_batches, fast_dev_run). Every reference must
  /// outlive the evaluator.
  Evaluator(const RunConfig& config, RunComponents& parts, const BatchPlacement& placement,
            std::unique_ptr<DataLoader> loader, int64_t batches, Collectives& collectives);

  bool enabled() const noexcept { return loader_ != nullptr; }
  /// [all ranks] Evaluates the current model on the validation split: "<prefix>/loss" then
  /// "<prefix>/<metric>" in config order. Data-parallel: sums over the disjoint shards, so every
  /// rank returns the single-process values. Leaves the model in training mode.
  Scalars evaluate(const std::string& prefix = "val");
  /// Also evaluates `average` (swapped into `model_state`) after the live weights in every run(),
  /// as "val_<name>/*"; an average with no update yet is left out. Both must outlive the evaluator.
  void add_average(const WeightAverage& average, const std::vector<StateTensor>& model_state);
  /// [all ranks] evaluate() of the live weights and of each average, then the reactions at
  /// optimizer step `step`: remembers the result, steps a plateau `scheduler` on
  /// schedule.monitor, and takes checkpoint.monitor's value. Throws ConfigError when
  /// checkpoint.monitor is not evaluated but save_top_k needs it (an average's value before its
  /// first update is just absent).
  /// `stop_flags` (training's evaluations, RunControl::evaluation_stop_flags): this rank's reasons to
  /// abandon the evaluation, read between batches and agreed in each pass's header all-reduce
  /// (EvaluationPass::stop_flags). Abandoned on every rank: returns nothing, with no reaction
  /// (nothing remembered, no schedule step), and stopped_by() holds the flags ORed over ranks.
  std::optional<Scalars> run(int64_t step, LrScheduler& scheduler, const std::function<uint32_t()>& stop_flags = {});
  /// The flags that abandoned the last run() (0 when it ran to its end).
  uint32_t stopped_by() const noexcept { return stopped_by_; }
  /// The abandoned evaluation a checkpoint saved now must make its resume repeat.
  void set_pending(Pending pending) noexcept { pending_ = pending; }
  /// The abandoned evaluation still owed (a checkpoint saved now carries it), or kNone.
  Pending pending() const noexcept { return pending_; }
  /// Whether `pending` is owed (then no longer: the caller runs it now).
  bool take_pending(Pending pending) noexcept {
    if (pending_ != pending) return false;
    pending_ = Pending::kNone;
    return true;
  }
  /// [all ranks] The sanity check before training (eval.sanity_batches, Lightning's
  /// num_sanity_val_steps): the live weights on the first `batches` batches of the validation
  /// split, the values dropped, nothing remembered; then each monitor in use (checkpoint ranking,
  /// early stopping, a plateau schedule) must name an evaluated value, else ConfigError. A
  /// failing model, loss or metric throws as in any evaluation, before an epoch is spent. The
  /// model computes without autograd (not in inference mode: a tensor a plugin keeps from its
  /// first call must serve training's autograd) and draws no random numbers, so training is
  /// unchanged.
  void sanity_check(int64_t batches);
  /// The first samples the last run() skipped on this rank (data.on_bad_sample = "skip"), with
  /// their errors. Requires enabled().
  const std::vector<SkippedSample>& first_skipped() const { return loader_->first_skipped(); }
  /// Early stopping's verdict on `eval`, taken after `epochs_trained` whole epochs: the reason to
  /// stop, or nothing.
  std::optional<std::string> early_stop(const Scalars& eval, int64_t epochs_trained) {
    return early_stopping_.update(eval, epochs_trained);
  }

  /// The last evaluation (empty before the first).
  const Scalars& last() const noexcept { return last_; }
  /// Replaces the last evaluation (load_best_at_end evaluates the best weights).
  void set_last(Scalars eval) { last_ = std::move(eval); }
  /// Whether the last evaluation was taken at optimizer step `step`.
  bool evaluated_at(int64_t step) const noexcept { return last_step_ == step; }
  /// checkpoint.monitor's value when the last evaluation was taken at `step` (it describes the
  /// weights of that step), else nothing.
  std::optional<double> monitor_at(int64_t step) const { return last_step_ == step ? monitor_ : std::nullopt; }

  /// Whether early stopping can stop the run (EarlyStopping::enabled).
  bool early_stopping_enabled() const { return early_stopping_.enabled(); }
  /// Early stopping's state for a checkpoint, and its restore.
  std::vector<double> early_stopping_state() const { return early_stopping_.state(); }
  void load_early_stopping_state(const std::vector<double>& state) { early_stopping_.load_state(state); }
  /// Why early stopping had ended the run the restored state comes from, resumed after
  /// `epochs_trained` whole epochs (EarlyStopping::ended_run).
  std::optional<std::string> early_stopping_ended_run(int64_t epochs_trained) const {
    return early_stopping_.ended_run(epochs_trained);
  }

 private:
  const RunConfig& config_;
  RunComponents& parts_;
  const BatchPlacement& placement_;
  std::unique_ptr<DataLoader> loader_;
  int64_t batches_;
  Collectives& collectives_;
  EarlyStopping early_stopping_;
  Scalars last_;
  int64_t last_step_ = -1;
  std::optional<double> monitor_; ///< checkpoint.monitor in the evaluation at last_step_
  std::vector<const WeightAverage*> averages_;
  const std::vector<StateTensor>* model_state_ = nullptr; ///< where averages are swapped in
  uint32_t stopped_by_ = 0;
  Pending pending_ = Pending::kNone;
  /// evaluate() that `stop_flags` may abandon: nothing when it was (stopped_by_ says why).
  std::optional<Scalars> evaluate_unless_stopped(const std::string& prefix, const std::function<uint32_t()>& stop_flags);
};

}  // namespace tp
