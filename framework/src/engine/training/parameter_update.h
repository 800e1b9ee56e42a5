// Phases 5 and 6 of the training step (ARCH-15, docs/engine.md): everything that changes the
// weights after the window's gradients, with one owner. Phase 5, the update: the window's
// gradient correction, unscaling and clipping with their statistics, the optimizer step, the fp16
// grad scaler. Phase 6, what advances with every step: the schedule (SWALR during the SWA epochs),
// the step count, the weights' finiteness watch, the EMA; and per epoch the SWA average. Each part
// saves and restores its own state. One owner for both the eager step and the captured one
// (docs/cuda_graphs.md): with a fused optimizer the update is device work, every statistic an
// in-place accumulation on a tensor that lives as long as the update, so a CUDA graph can capture
// apply() once and replay it with the numbers eager gives; the lr and the step counts live on the
// device (stage()), so nothing in apply() needs a host value.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "tp/framework/amp/grad_scaler.h"
#include "tp/framework/config/run_config.h"
#include "engine/training/finite_weights.h"
#include "engine/training/weight_average.h"
#include "tp/framework/optim/lr_scheduler.h"
#include "tp/framework/optim/optimizer_factory.h"
#include "tp/framework/util/log.h"

namespace tp {

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

struct CheckpointContents;
struct LoadedCheckpoint;

/// The update of one optimizer step, what advances with it, and the averages of the weights. The
/// step runner calls stage() before the step, apply() after the window's backward and advance()
/// after every complete window; the trainer sets the schedule, asks for the averages
/// (create_averages), marks the SWA epochs' bounds, and checkpoints the update's state.
///
/// Thread tag: [main]. Not copyable (it owns the fp16 scaler, the schedules and the averages).
class ParameterUpdate {
 public:
  /// `config`, `optim`, `model_state` and `log` must outlive the update; `optim` and
  /// `model_state` may still be empty here (the trainer fills them before the first step). The
  /// clipping keys of config.train are copied; the scaler is made from config.amp (enabled for
  /// fp16 only).
  ParameterUpdate(const RunConfig& config, BuiltOptimizer& optim, const std::vector<StateTensor>& model_state,
                  c10::Device device, Logger& log);
  ~ParameterUpdate();
  ParameterUpdate(const ParameterUpdate&) = delete;
  ParameterUpdate& operator=(const ParameterUpdate&) = delete;

  /* 5. The update */

  /// [main, outside any graph capture] Before every update: the groups' lrs, which the schedule
  /// may have changed, onto the device where the optimizer's kernels read them.
  void stage();

  /// Whether apply() is device work only now: a fused optimizer with no state whose start needs
  /// a host decision (an fp16 run's first SGD momentum step decides on the host, once).
  bool device_only() const;
  /// Whether the next apply() reads the host once by design although the optimizer updates on
  /// the device: the fp16 first SGD momentum step above (run.sync_debug leaves that step alone).
  bool host_decides_once() const;
  /// Whether no parameter holds a gradient (between windows): what a capture of the step assumes.
  bool gradients_clear() const;

  /// [main] The parameters train.agc_clip_factor clips (train.agc_ignore's left out), chosen now
  /// from the model state; apply() chooses them at its first call otherwise. Call once the model
  /// state is filled, so a glob that matches nothing fails at start-up. Throws ConfigError naming
  /// train.agc_ignore[i]. Nothing without AGC.
  void select_agc_parameters();

  /// [main] The update: `correction` (undefined: none) multiplies every gradient (the window's
  /// exact normalisation), then unscaling (fp16), clipping (train.max_grad_norm, clip_value or
  /// agc_clip_factor), the
  /// optimizer step (skipped on an fp16 overflow: on the device when device_only()), the scaler's
  /// update, and the gradients set to none. `measure_norm` also measures the global gradient norm
  /// without clipping (train/grad_norm). Lets an out-of-memory error through to the caller.
  void apply(const at::Tensor& correction, bool measure_norm);

  /// The logging window's statistics since the last call, then starts a new window. A host
  /// read (a sync on CUDA): logging steps only.
  UpdateStats read_stats();
  /// Optimizer steps the fp16 scaler skipped in this process. A host read when the device counted.
  int64_t scaler_skipped_steps() const;

  /// The fp16 grad scaler (a passthrough in other precisions); the step runner scales the loss
  /// with it before backward.
  GradScaler& scaler() noexcept { return scaler_; }
  const GradScaler& scaler() const noexcept { return scaler_; }

  /* 6. What advances with every optimizer step */
  /// [main] 6. Advance, after every complete window whether or not it `updated` (a skipped
  /// window, like a step the fp16 scaler skips, still moves time on, so the schedule and the step
  /// count stay aligned): the schedule steps (not during the SWA epochs: SWALR steps per epoch),
  /// the step is counted, the model's per-step hook runs (set_after_step), the weights' finiteness
  /// is observed after an update (on the device), and the EMA folds in the finite weights on
  /// every ema.every_steps-th step. Returns the lr every
  /// parameter group trained with, in group order, read before the schedule steps (the history's
  /// `lr` is group 0's, as Lightning's LearningRateMonitor records it).
  std::vector<double> advance(bool updated);
  /// Optimizer steps taken (a resumed run's included).
  int64_t step() const noexcept { return step_; }
  /// [main] What advance() calls once per optimizer step with the new step count (1-based), after
  /// the schedule and the count moved on and before the finiteness watch and the EMA: the model's
  /// after_optimizer_step (ABI 1.14), so the EMA and the watch see what the hook changed. Empty:
  /// nothing. Eager, on the host, also after a graph replay (phase 6 is never captured).
  void set_after_step(std::function<void(int64_t step)> hook) { after_step_ = std::move(hook); }
  /// The [schedule], stepped by advance() until SWALR takes over.
  void set_schedule(std::unique_ptr<LrScheduler> schedule);
  /// The schedule that owns the lr now: SWALR during the SWA epochs, else [schedule].
  LrScheduler& active_schedule() noexcept { return swa_schedule_ ? *swa_schedule_ : *schedule_; }
  /// Whether the weights are finite after the last update, and the first step whose update left
  /// them non-finite (finite_weights.h).
  const FiniteWeightsWatch& weights_watch() const noexcept { return weights_watch_; }

  /* The averages of the weights: [ema] per step, [swa] per epoch (parameter_update_averages.cpp) */
  /// [ema], [swa]: makes the enabled averages from the configuration, each a copy of the model's
  /// weights now (call once the model is placed), and logs them. `epochs` = the epochs the run
  /// trains. Throws ConfigError for swa.lr <= 0 or an swa.start_epoch after the last epoch.
  void create_averages(int64_t epochs);
  /// An EMA made elsewhere (a test's), updated every ema.every_steps steps (advance()).
  void set_ema(std::unique_ptr<WeightAverage> ema);
  const WeightAverage* ema() const noexcept { return ema_.get(); }
  const WeightAverage* swa() const noexcept { return swa_.get(); }
  /// The averages kept (EMA, then SWA), for evaluation, saves and data-parallel statistics.
  std::vector<const WeightAverage*> averages() const;
  /// [swa] At an epoch's start: from swa.start_epoch on (1-based), SWALR replaces the schedule,
  /// annealing from each group's lr now (logged).
  void begin_swa_epoch(int64_t epoch);
  /// [swa] At the end of an SWA epoch: folds the weights into the SWA average (never non-finite
  /// ones) and steps SWALR. Nothing outside the SWA epochs.
  void end_swa_epoch();
  /// [swa, all ranks] After the last epoch: the model takes the SWA weights and, with
  /// swa.update_bn, the BatchNorm statistics `refresh_batchnorm` recomputes for them (it returns
  /// the layers refreshed), which the average then takes too. Returns whether it did (false
  /// without an average or before any SWA epoch); the model is then evaluated and saved.
  bool finish_swa(const std::function<int64_t()>& refresh_batchnorm);

  /* Checkpoint (ARCH-20): each part its own */
  /// The step count, the optimizer (its state and group names), the schedules, the grad scaler.
  void save_state(CheckpointContents& into) const;
  /// The same, from `from`; SWALR is rebuilt when the checkpoint was written inside the SWA epochs.
  void load_state(const LoadedCheckpoint& from);
  /// The averages' weights and update counts.
  void save_averages(CheckpointContents& into) const;
  /// The same, from `from`. An average the checkpoint lacks (written before it was enabled)
  /// starts afresh from the resumed weights, as a new AveragedModel would, with a warning.
  /// Throws tp::Error for an average that does not fit the model.
  void load_averages(const LoadedCheckpoint& from);

 private:
  /// train.max_grad_norm's norm of `grads` (torch.nn.utils.clip_grad_norm_'s, foreach) into
  /// grad_norm_, and the clip when a limit is set. No host sync.
  void clip_by_norm(const std::vector<at::Tensor>& grads);

  const RunConfig& config_;
  const std::vector<StateTensor>& model_state_;
  const c10::Device device_;  ///< where the update's statistics and the SWA average live
  Logger& log_;
  const double max_grad_norm_;  ///< train.max_grad_norm (0: no clip)
  const double grad_norm_type_; ///< train.grad_norm_type
  const double clip_value_;     ///< train.clip_value (0: none)
  const double agc_clip_factor_; ///< train.agc_clip_factor (0: no adaptive clipping)
  std::vector<at::Tensor> agc_params_; ///< what AGC clips (select_agc_parameters)
  bool agc_selected_ = false;          ///< agc_params_ is chosen
  BuiltOptimizer& optim_;
  GradScaler scaler_;
  /* Statistics, on the device, accumulated in place (a graph replays into the same tensors) */
  at::Tensor grad_norm_;       ///< the last measured norm; NaN until one is measured in the window
  at::Tensor clipped_steps_;   ///< steps of the logging window whose norm exceeded max_grad_norm
  at::Tensor clip_checks_;     ///< steps of the logging window that compared against max_grad_norm
  at::Tensor device_skipped_;  ///< fp16 steps skipped on the device, whole process
  int64_t host_skipped_ = 0;   ///< fp16 steps skipped by a host decision, whole process
  /* 6 */
  int64_t step_ = 0;            ///< optimizer steps taken
  std::function<void(int64_t)> after_step_; ///< set_after_step: the model's per-step hook
  std::unique_ptr<LrScheduler> schedule_, swa_schedule_;
  FiniteWeightsWatch weights_watch_; ///< the weights after each update, on the device
  std::unique_ptr<WeightAverage> ema_, swa_;
};

}  // namespace tp
