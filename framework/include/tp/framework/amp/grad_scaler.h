// GradScaler: dynamic loss scaling for fp16 training, with exactly the semantics of Python's
// torch.amp.GradScaler (flashlight calls the same idea DynamicScaler).
//
// fp16 gradients of small magnitude underflow to zero. The scaler multiplies the loss by a large
// factor S before backward, so gradients are S times larger, then divides them by S before the
// optimizer sees them. If any gradient came out inf/NaN, S was too large: the optimizer step is
// skipped and S shrinks (x backoff_factor). After growth_interval steps in a row without
// overflow, S grows (x growth_factor). Skipped steps are expected at the start while S calibrates.
//
// The scale, growth tracker and inf flags are tensors on the gradients' device and the update runs
// on that device with LibTorch's own kernels (_amp_foreach_non_finite_check_and_unscale_,
// _amp_update_scale_), so the only host synchronisation per step is step() reading the inf flag,
// and none with an optimizer that skips on the device (device_skip_flag()).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace tp {

/// Options of GradScaler; defaults are torch.amp.GradScaler's. Fluent setters:
///   tp::GradScalerOptions().init_scale(1024.0).growth_interval(100)
struct GradScalerOptions {
#define TP_SCALER_ARG(T, name)               \
  GradScalerOptions& name(T value) noexcept { \
    name##_ = value;                         \
    return *this;                            \
  }                                          \
  T name() const noexcept { return name##_; } \
  T name##_

  /// Scale before the first step (> 0, finite).
  TP_SCALER_ARG(double, init_scale) = 65536.0;
  /// Multiplier after growth_interval consecutive finite steps (> 1).
  TP_SCALER_ARG(double, growth_factor) = 2.0;
  /// Multiplier after a step with inf/NaN gradients (in (0, 1)).
  TP_SCALER_ARG(double, backoff_factor) = 0.5;
  /// Consecutive finite steps before the scale grows (>= 1).
  TP_SCALER_ARG(int64_t, growth_interval) = 2000;
  /// false: the scaler is a passthrough (scale() returns the loss, step() just steps).
  TP_SCALER_ARG(bool, enabled) = true;
#undef TP_SCALER_ARG
};

/// The scaler's checkpointable state, field for field Python's GradScaler.state_dict()
/// ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"), so a
/// checkpoint can hand it to `scaler.load_state_dict` in Python. Take it after update().
struct GradScalerState {
  bool enabled = true;           ///< false: saved from a disabled scaler (Python's empty dict)
  double scale = 65536.0;        ///< current scale
  int64_t growth_tracker = 0;    ///< consecutive finite steps since the last growth or backoff
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

/// Dynamic loss scaler. One per run, shared by all optimizers of the run.
///
/// Per optimizer and step the order is: scale(loss).backward() (any number of micro-steps),
/// at most one unscale() (only if you need unscaled grads, e.g. to clip), step(), then one
/// update() after every optimizer has stepped. Errors (tp::Error) mirror PyTorch's: unscale()
/// twice in a step, unscale() after step(), step() twice, update() with no step before it.
///
/// Thread tag: [main]. Not copyable.
///
/// Example (one step with gradient clipping; accumulation calls backward several times first):
///   tp::GradScaler scaler(tp::GradScalerOptions().enabled(precision == tp::Precision::Fp16));
///   for (auto& batch : loader) {
///     optimizer.zero_grad();
///     at::Tensor loss;
///     {
///       tp::AutocastGuard autocast(device.type(), precision);
///       loss = loss_fn(model(batch.input), batch.target);
///     }
///     scaler.scale(loss).backward();
///     scaler.unscale(optimizer);                         // grads are true grads from here on
///     torch::nn::utils::clip_grad_norm_(params, 1.0);    // clip once, after unscale
///     bool stepped = scaler.step(optimizer);             // false: inf/NaN grads, step skipped
///     scaler.update();                                   // backoff or growth of the scale
///   }
class GradScaler {
 public:
  /// Throws tp::Error when an option is out of range (checked only when enabled, like PyTorch).
  explicit GradScaler(GradScalerOptions options = {});
  GradScaler(const GradScaler&) = delete;
  GradScaler& operator=(const GradScaler&) = delete;

  /// `loss * scale`, differentiable (call .backward() on the result). The first call creates the
  /// scale on `loss`'s device, where it stays. Disabled: returns `loss` itself. No host sync.
  at::Tensor scale(const at::Tensor& loss);

  /// Divides the gradients of `optimizer`'s parameters by the scale in place and records whether
  /// any is inf/NaN. Call at most once per optimizer per step, after the last backward of the
  /// step and before clipping; step() calls it if you did not. Throws tp::Error if already
  /// called since the last update() ("unscale() has already been called ..."), if called after
  /// step(), if scale() was never called, or if a gradient is float16 (fp16 parameters cannot
  /// take a scaled update; keep master weights float32). Disabled: no-op. No host sync.
  void unscale(torch::optim::Optimizer& optimizer);

  /// Unscales if unscale() was not called this step, then runs optimizer.step() unless a
  /// gradient was inf/NaN. Returns true when the optimizer stepped. Throws tp::Error when
  /// step() was already called since the last update(), or no parameter has a gradient.
  /// Disabled: optimizer.step(), returns true. Cost: one device-to-host sync (the inf flag).
  bool step(torch::optim::Optimizer& optimizer);

  /// For an optimizer whose update skips on the device (DeviceStepOptimizer, optim/device_step.h):
  /// unscales if unscale() was not called this step, counts the optimizer as stepped (update()
  /// follows as usual) and returns the step's inf flag, a float32 scalar on the scale's device
  /// holding 1 when a gradient was inf/NaN, to pass to DeviceStepOptimizer::step_on_device. The
  /// same decision step() makes, without its host read: capturable in a CUDA graph. Throws like
  /// step(). Disabled: returns an undefined tensor (nothing to skip).
  at::Tensor device_skip_flag(torch::optim::Optimizer& optimizer);

  /// Updates the scale from every optimizer's inf flags of this step (backoff on overflow, growth
  /// after growth_interval finite steps) and starts the next step. Throws tp::Error if no
  /// optimizer was unscaled/stepped since the last update(). Disabled: no-op. No host sync.
  void update();

  /// Sets the scale to `new_scale` instead of the dynamic rule (PyTorch's update(new_scale)),
  /// and starts the next step. Disabled: no-op.
  void update(double new_scale);

  /// The current scale; 1.0 when disabled; init_scale before the first scale(). Cost: host sync.
  double get_scale() const;

  /// Consecutive finite steps counted toward the next growth; 0 when disabled. Cost: host sync.
  int64_t get_growth_tracker() const;

  bool is_enabled() const noexcept { return options_.enabled(); }
  const GradScalerOptions& options() const noexcept { return options_; }

  /// The state to checkpoint (call between update() and the next scale()). Disabled: a state
  /// with enabled = false. Cost: host sync.
  GradScalerState state() const;

  /// Restores `state`, including the growth/backoff factors and interval, as Python's
  /// load_state_dict does. Disabled scaler: no-op. Throws tp::Error when `state` comes from a
  /// disabled scaler (nothing to restore) or holds out-of-range values.
  void load_state(const GradScalerState& state);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct OptimizerState {
    Stage stage = Stage::Ready;
    /// One float32 flag per gradient device, > 0 when an inf/NaN was seen there.
    std::vector<std::pair<c10::Device, at::Tensor>> found_inf_per_device;
  };

  /* Helpers */
  void check_initialized(const char* function) const;
  /// step()'s and device_skip_flag()'s common part: unscales if needed, marks the optimizer
  /// stepped and returns its inf flags summed over devices (no host read).
  at::Tensor take_step_flag(torch::optim::Optimizer& optimizer, const char* function);
  std::vector<std::pair<c10::Device, at::Tensor>> unscale_grads(torch::optim::Optimizer& optimizer,
                                                                const at::Tensor& inv_scale);

  GradScalerOptions options_;
  at::Tensor scale_;           ///< float32 scalar on the grads' device; undefined until scale()
  at::Tensor growth_tracker_;  ///< int32 scalar beside scale_
  int64_t init_growth_tracker_ = 0;
  /// Keyed by optimizer address; cleared by update(), as PyTorch's per-optimizer states.
  std::unordered_map<const torch::optim::Optimizer*, OptimizerState> per_optimizer_;
};

}  // namespace tp
