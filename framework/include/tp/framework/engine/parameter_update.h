// Phase 5 of the training step (ARCH-15, docs/engine.md): the parameters' update from the
// window's gradients, and the logging window's update statistics. One owner for both the eager
// step and the captured one (docs/cuda_graphs.md): with a fused optimizer the whole update is
// device work, every statistic an in-place accumulation on a tensor that lives as long as the
// runner, so a CUDA graph can capture apply() once and replay it with the numbers eager gives.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <limits>

#include "tp/framework/amp/grad_scaler.h"
#include "tp/framework/config/run_config.h"
#include "tp/framework/optim/optimizer_factory.h"

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

/// The update of one optimizer step and its statistics, for the step runner (which calls stage()
/// before the step, apply() after the window's backward, read_stats() on logging steps).
///
/// Thread tag: [main]. Not copyable (it owns the fp16 scaler).
class ParameterUpdate {
 public:
  /// `optim` must outlive the update; `train`'s clipping keys are copied; the scaler is made from
  /// `amp` (enabled for fp16 only).
  ParameterUpdate(const TrainSection& train, const AmpSection& amp, BuiltOptimizer& optim, c10::Device device);

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

  /// [main] The update: `correction` (undefined: none) multiplies every gradient (the window's
  /// exact normalisation), then unscaling (fp16), clipping (train.max_grad_norm, clip_value), the
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
  /// with it before backward, and checkpoints its state.
  GradScaler& scaler() noexcept { return scaler_; }
  const GradScaler& scaler() const noexcept { return scaler_; }

 private:
  /// train.max_grad_norm's norm of `grads` (torch.nn.utils.clip_grad_norm_'s, foreach) into
  /// grad_norm_, and the clip when a limit is set. No host sync.
  void clip_by_norm(const std::vector<at::Tensor>& grads);

  const double max_grad_norm_;  ///< train.max_grad_norm (0: no clip)
  const double grad_norm_type_; ///< train.grad_norm_type
  const double clip_value_;     ///< train.clip_value (0: none)
  BuiltOptimizer& optim_;
  GradScaler scaler_;
  /* Statistics, on the device, accumulated in place (a graph replays into the same tensors) */
  at::Tensor grad_norm_;       ///< the last measured norm; NaN until one is measured in the window
  at::Tensor clipped_steps_;   ///< steps of the logging window whose norm exceeded max_grad_norm
  at::Tensor clip_checks_;     ///< steps of the logging window that compared against max_grad_norm
  at::Tensor device_skipped_;  ///< fp16 steps skipped on the device, whole process
  int64_t host_skipped_ = 0;   ///< fp16 steps skipped by a host decision, whole process
};

}  // namespace tp
