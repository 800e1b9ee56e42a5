#include "tp/framework/amp/grad_scaler.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>
#include <ATen/ops/full.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "tp/framework/error.h"

namespace tp {
namespace {

// PyTorch checks only the two factors; the other checks catch config typos that would otherwise
// train with a zero or NaN scale (or grow the scale every step) without any error.
void validate(double init_scale, double growth_factor, double backoff_factor, int64_t growth_interval,
              const char* where) {
  TP_CHECK(std::isfinite(init_scale) && init_scale > 0.0, where, ": the scale must be finite and > 0, got ", init_scale);
  TP_CHECK(growth_factor > 1.0, where, ": growth_factor must be > 1, got ", growth_factor);
  TP_CHECK(backoff_factor > 0.0 && backoff_factor < 1.0, where, ": backoff_factor must be in (0, 1), got ",
           backoff_factor);
  TP_CHECK(growth_interval >= 1, where, ": growth_interval must be >= 1, got ", growth_interval);
}

// The value of a per-device tensor on `device`: the tensor itself when already there, else a
// copy (non_blocking: the copy is queued on the stream, no host sync).
at::Tensor on_device(const at::Tensor& tensor, c10::Device device) {
  if (tensor.device() == device) return tensor;
  return tensor.to(device, tensor.scalar_type(), /*non_blocking=*/true, /*copy=*/true);
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  if (options_.enabled()) {
    validate(options_.init_scale(), options_.growth_factor(), options_.backoff_factor(), options_.growth_interval(),
             "GradScaler");
  }
}

at::Tensor GradScaler::scale(const at::Tensor& loss) {
  if (!options_.enabled()) return loss;
  TP_CHECK(loss.defined(), "GradScaler::scale(): the loss tensor is undefined");
  if (!scale_.defined()) {
    // Created lazily on the loss's device, which is where the gradients will be: keeps the whole
    // scaling loop on the device with no transfer.
    scale_ = at::full({}, options_.init_scale(), at::TensorOptions().dtype(at::kFloat).device(loss.device()));
    growth_tracker_ = at::full({}, init_growth_tracker_, at::TensorOptions().dtype(at::kInt).device(loss.device()));
  }
  return loss.mul(on_device(scale_, loss.device()));
}

void GradScaler::check_initialized(const char* function) const {
  TP_CHECK(scale_.defined(), "GradScaler::", function,
           " was called before any scale(): the loss of this step must be scaled with scaler.scale(loss) "
           "before backward.");
}

std::vector<std::pair<c10::Device, at::Tensor>> GradScaler::unscale_grads(torch::optim::Optimizer& optimizer,
                                                                          const at::Tensor& inv_scale) {
  // The kernel takes one list of same-device, same-dtype tensors; group like PyTorch does, in
  // first-seen order (the order does not change the result).
  struct Group {
    c10::Device device;
    c10::ScalarType dtype;
    std::vector<at::Tensor> grads;
  };
  std::vector<Group> groups;
  at::NoGradGuard no_grad;
  for (auto& param_group : optimizer.param_groups()) {
    for (const auto& param : param_group.params()) {
      const at::Tensor& grad = param.grad();
      if (!grad.defined()) continue;
      TP_CHECK(grad.scalar_type() != at::kHalf,
               "GradScaler::unscale(): attempting to unscale float16 gradients. Keep parameters (and so their "
               "gradients) in float32 and let autocast run the forward in float16.");
      // Sparse gradients: only the stored values carry magnitudes.
      at::Tensor values = grad.is_sparse() ? grad._values() : grad;
      auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
        return g.device == values.device() && g.dtype == values.scalar_type();
      });
      if (it == groups.end()) {
        groups.push_back({values.device(), values.scalar_type(), {}});
        it = std::prev(groups.end());
      }
      it->grads.push_back(std::move(values));
    }
  }
  std::vector<std::pair<c10::Device, at::Tensor>> found_inf_per_device;
  std::vector<std::pair<c10::Device, at::Tensor>> inv_scale_per_device;
  for (auto& group : groups) {
    auto found = std::find_if(found_inf_per_device.begin(), found_inf_per_device.end(),
                              [&](const auto& entry) { return entry.first == group.device; });
    if (found == found_inf_per_device.end()) {
      found_inf_per_device.emplace_back(group.device,
                                        at::full({}, 0.0, at::TensorOptions().dtype(at::kFloat).device(group.device)));
      inv_scale_per_device.emplace_back(group.device, on_device(inv_scale, group.device));
      found = std::prev(found_inf_per_device.end());
    }
    const at::Tensor& device_inv_scale = inv_scale_per_device[found - found_inf_per_device.begin()].second;
    // In place: multiplies every grad by inv_scale and sets found_inf to 1 if any value is inf/NaN.
    at::_amp_foreach_non_finite_check_and_unscale_(group.grads, found->second, device_inv_scale);
  }
  return found_inf_per_device;
}

void GradScaler::unscale(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled()) return;
  check_initialized("unscale()");
  OptimizerState& state = per_optimizer_[&optimizer];
  TP_CHECK(state.stage != Stage::Unscaled,
           "GradScaler::unscale() has already been called on this optimizer since the last update(). Unscale "
           "once per optimizer step, after the last backward of the step (with gradient accumulation: not on "
           "every micro-step), then clip, then step().");
  TP_CHECK(state.stage != Stage::Stepped, "GradScaler::unscale() is being called after step(); call update() first.");
  // 1/scale computed in float64 and rounded to float32, as PyTorch does, so unscaled gradients are
  // bit-identical to Python's.
  const at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
  state.found_inf_per_device = unscale_grads(optimizer, inv_scale);
  state.stage = Stage::Unscaled;
}

at::Tensor GradScaler::take_step_flag(torch::optim::Optimizer& optimizer, const char* function) {
  check_initialized(function);
  TP_CHECK(per_optimizer_[&optimizer].stage != Stage::Stepped, "GradScaler::", function,
           " has already been called since the last update().");
  if (per_optimizer_[&optimizer].stage == Stage::Ready) unscale(optimizer);
  OptimizerState& state = per_optimizer_[&optimizer];
  TP_CHECK(!state.found_inf_per_device.empty(), "GradScaler::", function,
           ": no inf checks were recorded for this optimizer: none of its parameters has a gradient. Was backward() "
           "run on the scaled loss?");
  at::Tensor found_inf = state.found_inf_per_device.front().second;
  for (std::size_t i = 1; i < state.found_inf_per_device.size(); ++i) {
    found_inf = found_inf.add(on_device(state.found_inf_per_device[i].second, found_inf.device()));
  }
  state.stage = Stage::Stepped;
  return found_inf;
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled()) {
    optimizer.step();
    return true;
  }
  const at::Tensor found_inf = take_step_flag(optimizer, "step()");
  // CPU-GPU sync point: the one host read of the step, to decide on the host whether to call
  // optimizer.step() (the loop optimizers have no found_inf-aware kernels; device_skip_flag()
  // serves the fused ones without it).
  const bool stepped = found_inf.item<float>() == 0.0f;
  if (stepped) optimizer.step();
  return stepped;
}

at::Tensor GradScaler::device_skip_flag(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled()) return {};
  // Several devices' flags add up; the kernels skip where the flag is exactly 1.
  return take_step_flag(optimizer, "device_skip_flag()").clamp_max(1.0);
}

void GradScaler::update() {
  if (!options_.enabled()) return;
  check_initialized("update()");
  at::Tensor found_inf;
  for (const auto& [optimizer, state] : per_optimizer_) {
    for (const auto& [device, flag] : state.found_inf_per_device) {
      const at::Tensor local = on_device(flag, scale_.device());
      found_inf = found_inf.defined() ? found_inf.add(local) : local;
    }
  }
  TP_CHECK(found_inf.defined(),
           "GradScaler::update(): no inf checks were recorded since the last update(); call step() (or "
           "unscale()) for each optimizer first.");
  // Runs on the scale's device: scale *= backoff if found_inf, else growth_tracker += 1 and
  // scale *= growth once it reaches growth_interval. No host sync.
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf, options_.growth_factor(), options_.backoff_factor(),
                         options_.growth_interval());
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!options_.enabled()) return;
  check_initialized("update(new_scale)");
  scale_.fill_(new_scale);
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!options_.enabled()) return 1.0;
  return scale_.defined() ? static_cast<double>(scale_.item<float>()) : options_.init_scale();
}

int64_t GradScaler::get_growth_tracker() const {
  if (!options_.enabled()) return 0;
  return growth_tracker_.defined() ? growth_tracker_.item<int32_t>() : init_growth_tracker_;
}

GradScalerState GradScaler::state() const {
  GradScalerState out;
  out.enabled = options_.enabled();
  if (!out.enabled) return out;
  out.scale = get_scale();
  out.growth_tracker = get_growth_tracker();
  out.growth_factor = options_.growth_factor();
  out.backoff_factor = options_.backoff_factor();
  out.growth_interval = options_.growth_interval();
  return out;
}

void GradScaler::load_state(const GradScalerState& state) {
  if (!options_.enabled()) return;
  TP_CHECK(state.enabled,
           "GradScaler::load_state(): the saved state comes from a disabled GradScaler (a run without fp16), "
           "so there is no scale to restore.");
  validate(state.scale, state.growth_factor, state.backoff_factor, state.growth_interval, "GradScaler::load_state()");
  TP_CHECK(state.growth_tracker >= 0, "GradScaler::load_state(): growth_tracker must be >= 0, got ",
           state.growth_tracker);
  options_.init_scale(state.scale)
      .growth_factor(state.growth_factor)
      .backoff_factor(state.backoff_factor)
      .growth_interval(state.growth_interval);
  init_growth_tracker_ = state.growth_tracker;
  if (scale_.defined()) scale_.fill_(state.scale);
  if (growth_tracker_.defined()) growth_tracker_.fill_(state.growth_tracker);
}

}  // namespace tp
