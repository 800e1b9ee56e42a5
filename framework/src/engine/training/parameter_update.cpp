// Phase 5 of the training step in its sub-phases (5a-5d), the same calls eager and captured;
// phase 6, what advances with every step. The averages and the SWA epochs are
// parameter_update_averages.cpp, the checkpoint part parameter_update_state.cpp.
#include "engine/training/parameter_update.h"

#include <ATen/ATen.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/optimizer.h>

#include <limits>
#include <utility>
#include <vector>

#include "tp/framework/amp/precision.h"
#include "tp/framework/optim/adaptive_clip.h"
#include "tp/framework/optim/device_step.h"

namespace tp {

ParameterUpdate::ParameterUpdate(const RunConfig& config, BuiltOptimizer& optim,
                                 const std::vector<StateTensor>& model_state, c10::Device device, Logger& log)
    : config_(config),
      model_state_(model_state),
      device_(device),
      log_(log),
      max_grad_norm_(config.train.max_grad_norm),
      grad_norm_type_(config.train.grad_norm_type),
      clip_value_(config.train.clip_value),
      agc_clip_factor_(config.train.agc_clip_factor),
      optim_(optim),
      scaler_(GradScalerOptions()
                  .init_scale(config.amp.init_scale)
                  .growth_factor(config.amp.growth_factor)
                  .backoff_factor(config.amp.backoff_factor)
                  .growth_interval(config.amp.growth_interval)
                  .enabled(needs_grad_scaler(config.amp.precision))) {
  const auto options = at::TensorOptions().dtype(at::kFloat).device(device);
  grad_norm_ = at::full({}, std::numeric_limits<double>::quiet_NaN(), options);
  clipped_steps_ = at::zeros({}, options);
  clip_checks_ = at::zeros({}, options);
  device_skipped_ = at::zeros({}, options);
}

ParameterUpdate::~ParameterUpdate() = default;

void ParameterUpdate::stage() {
  if (DeviceStepOptimizer* device = device_step(*optim_.optimizer)) device->stage_learning_rates();
}

bool ParameterUpdate::device_only() const {
  const DeviceStepOptimizer* device = device_step(*optim_.optimizer);
  return device != nullptr && !(scaler_.is_enabled() && device->starts_state());
}

bool ParameterUpdate::host_decides_once() const {
  return device_step(*optim_.optimizer) != nullptr && !device_only();
}

bool ParameterUpdate::gradients_clear() const {
  for (const auto& group : optim_.optimizer->param_groups())
    for (const auto& p : group.params())
      if (p.grad().defined()) return false;
  return true;
}

void ParameterUpdate::select_agc_parameters() {
  if (agc_clip_factor_ <= 0 || agc_selected_) return;
  agc_params_ = agc_parameters(model_state_, config_.train.agc_ignore);
  agc_selected_ = true;
}

void ParameterUpdate::apply(const at::Tensor& correction, bool measure_norm) {
  // torch::nn::utils::clip_grad_* take the parameters (they clip each one's .grad()), the
  // foreach calls below take the gradients themselves.
  std::vector<at::Tensor> params, grads;
  for (const auto& group : optim_.optimizer->param_groups())
    for (const auto& p : group.params())
      if (p.grad().defined()) {
        params.push_back(p);
        grads.push_back(p.grad());
      }
  // 5a. The window's exact normalisation (StepRunner::normalised_loss).
  if (correction.defined() && !grads.empty()) at::_foreach_mul_(grads, correction.to(grads.front().scalar_type()));
  // 5b. Clip once, after unscaling, right before the step (ARCH-9); the norm is also measured
  //     for train/grad_norm where asked, before any clip. AGC is the third clip mode, never beside
  //     the other two (refused when the config is loaded).
  if (max_grad_norm_ > 0 || clip_value_ > 0 || agc_clip_factor_ > 0 || measure_norm) {
    scaler_.unscale(*optim_.optimizer);
    if ((max_grad_norm_ > 0 || measure_norm) && !grads.empty()) clip_by_norm(grads);
    if (clip_value_ > 0) torch::nn::utils::clip_grad_value_(params, clip_value_);
    if (agc_clip_factor_ > 0) {
      select_agc_parameters();
      adaptive_clip_grad(agc_params_, agc_clip_factor_, grad_norm_type_);
    }
  }
  // 5c. Step. fp16: an overflow skips it and the scaler backs off, decided on the device by the
  //     fused kernels, else on the host (the loops; an SGD momentum buffer's first step).
  if (device_only()) {
    const at::Tensor skip = scaler_.device_skip_flag(*optim_.optimizer);
    device_step(*optim_.optimizer)->step_on_device(skip);
    if (skip.defined()) device_skipped_.add_(skip.to(device_skipped_.device()));
  } else if (!scaler_.step(*optim_.optimizer)) {
    ++host_skipped_;
  }
  // 5d. The scaler's backoff or growth, then gradients to none: frees them and skips a memset
  //     (the next backward writes them anew).
  scaler_.update();
  optim_.optimizer->zero_grad(/*set_to_none=*/true);
}

void ParameterUpdate::clip_by_norm(const std::vector<at::Tensor>& grads) {
  // torch.nn.utils.clip_grad_norm_ (foreach): the norm of the per-tensor norms, then one
  // clamped coefficient for every gradient. Unlike LibTorch's clip_grad_norm_ it returns no
  // double, so CUDA runs do not wait for the device here every step.
  const double norm_type = grad_norm_type_;
  std::vector<at::Tensor> norms = at::_foreach_norm(grads, norm_type);
  for (auto& n : norms) n = n.to(grads.front().device(), at::kFloat);
  const at::Tensor norm = at::linalg_vector_norm(at::stack(norms), norm_type);
  grad_norm_.copy_(norm);
  const double max_norm = max_grad_norm_;
  if (max_norm <= 0) return;
  const at::Tensor coefficient = (max_norm / (norm + 1e-6)).clamp_max(1.0);
  at::_foreach_mul_(grads, coefficient);
  clipped_steps_.add_((norm > max_norm).to(at::kFloat));
  clip_checks_.add_(1);
}

UpdateStats ParameterUpdate::read_stats() {
  UpdateStats stats;
  stats.scaler_enabled = scaler_.is_enabled();
  // Logging steps only: one host read of the window's figures (a sync on CUDA), and under fp16 a
  // second of the scaler's scale.
  const at::Tensor host =
      at::stack({grad_norm_, clipped_steps_, clip_checks_, device_skipped_}).to(at::kCPU, at::kDouble);
  const double* values = host.const_data_ptr<double>();
  stats.grad_norm = values[0];
  if (values[2] > 0) stats.clipped_fraction = values[1] / values[2];
  if (scaler_.is_enabled()) {
    stats.scale = scaler_.get_scale();
    stats.scaler_skipped = host_skipped_ + static_cast<int64_t>(values[3]);
  }
  grad_norm_.fill_(std::numeric_limits<double>::quiet_NaN());
  clipped_steps_.zero_();
  clip_checks_.zero_();
  return stats;
}

int64_t ParameterUpdate::scaler_skipped_steps() const {
  if (!scaler_.is_enabled()) return 0;
  return host_skipped_ + static_cast<int64_t>(device_skipped_.item<float>());
}

std::vector<double> ParameterUpdate::advance(bool updated) {
  // 6. Advance: the lrs this step trained with, then time moves on one optimizer step; SWALR
  //    steps per epoch (end_swa_epoch()). Every group's is read now: after schedule_->step() they
  //    are the next step's.
  std::vector<double> lrs;
  for (const auto& group : optim_.optimizer->param_groups()) lrs.push_back(group.options().get_lr());
  if (!swa_schedule_) schedule_->step();
  ++step_;
  // The model's per-step hook (a momentum teacher) before the watch and the EMA, so both see the
  // state the whole step leaves, the teacher it moved included; called for skipped windows too,
  // so the steps it sees run 1, 2, 3... as the schedule's do.
  if (after_step_) after_step_(step_);
  // Whether the update left the weights finite, on the device (no sync): the averages fold in
  // only finite weights, and a save names the step where they first stopped being finite.
  // (A hook may have moved lent state on a skipped window too.)
  if (updated || after_step_ || !weights_watch_.finite().defined()) weights_watch_.observe(model_state_, step_);
  if (ema_ && step_ % config_.ema.every_steps == 0) ema_->update(model_state_, weights_watch_.finite());
  return lrs;
}

void ParameterUpdate::set_schedule(std::unique_ptr<LrScheduler> schedule) { schedule_ = std::move(schedule); }

}  // namespace tp
