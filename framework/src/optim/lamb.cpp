// LAMB's update (lamb.h): timm 1.0.31's _single_tensor_lamb and _get_clip_grad_norm, op for op,
// so that on the CPU the same inputs give the same bits (the oracle measures it against timm).
#include "lamb.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/optim/serialize.h>

#include <cmath>
#include <optional>
#include <utility>

namespace tp::detail {

LambOptions::LambOptions(double lr) : torch::optim::AdamWOptions(lr) {
  // timm's Lamb defaults; AdamW's eps is 1e-8.
  eps(1e-6);
  weight_decay(0.01);
}

std::unique_ptr<torch::optim::OptimizerOptions> LambOptions::clone() const {
  return std::make_unique<LambOptions>(*this);
}

void LambOptions::serialize(torch::serialize::OutputArchive& archive) const {
  torch::optim::AdamWOptions::serialize(archive);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(bias_correction);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(grad_averaging);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(max_grad_norm);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(trust_clip);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(always_adapt);
}

void LambOptions::serialize(torch::serialize::InputArchive& archive) {
  torch::optim::AdamWOptions::serialize(archive);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, bias_correction);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, grad_averaging);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, max_grad_norm);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, trust_clip);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, always_adapt);
}

void LambParamState::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(step);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg_sq);
}

void LambParamState::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(int64_t, step);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(at::Tensor, exp_avg);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(at::Tensor, exp_avg_sq);
}

namespace {

// timm's _lamb_trust_ratio: ||w|| / ||update||, and 1 where either norm is 0 (a zero weight, e.g.
// a zero-initialised layer, still moves by lr x update; a zero update leaves the weight alone).
// The nested where keeps it on the device: no host read per parameter.
at::Tensor lamb_trust_ratio(const at::Tensor& w_norm, const at::Tensor& g_norm, bool trust_clip) {
  at::Tensor ratio = w_norm / g_norm;
  ratio = at::where(w_norm > 0, at::where(g_norm > 0, ratio, 1.0), 1.0);
  if (trust_clip) ratio = at::clamp(ratio, std::nullopt, 1.0);
  return ratio;
}

const LambOptions& options_of(const torch::optim::OptimizerParamGroup& group) {
  return static_cast<const LambOptions&>(group.options());
}

}  // namespace

Lamb::Lamb(const std::vector<torch::optim::OptimizerParamGroup>& param_groups, const LambOptions& defaults)
    : torch::optim::Optimizer(param_groups, std::make_unique<LambOptions>(defaults)) {
  const auto [beta1, beta2] = defaults.betas();
  TORCH_CHECK(defaults.lr() >= 0, "Invalid learning rate: ", defaults.lr());
  TORCH_CHECK(defaults.eps() >= 0, "Invalid epsilon value: ", defaults.eps());
  TORCH_CHECK(defaults.weight_decay() >= 0, "Invalid weight_decay value: ", defaults.weight_decay());
  TORCH_CHECK(defaults.max_grad_norm() >= 0, "Invalid max_grad_norm value: ", defaults.max_grad_norm());
  TORCH_CHECK(0 <= beta1 && beta1 < 1, "Invalid beta parameter at index 0: ", beta1);
  TORCH_CHECK(0 <= beta2 && beta2 < 1, "Invalid beta parameter at index 1: ", beta2);
}

at::Tensor Lamb::clip_divisor() const {
  // One value for the optimizer (timm reads self.defaults); the first group's, which a resume
  // restores with the other options.
  if (param_groups().empty()) return {};
  const double max_grad_norm = options_of(param_groups().front()).max_grad_norm();
  if (max_grad_norm <= 0) return {};
  std::vector<at::Tensor> grads;
  for (const auto& group : param_groups())
    for (const at::Tensor& p : group.params())
      if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return {};
  const at::Tensor global_norm = at::linalg_vector_norm(at::stack(at::_foreach_norm(grads)));
  return (global_norm / max_grad_norm).clamp_(1.0, std::nullopt);
}

torch::Tensor Lamb::step(LossClosure closure) {
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  torch::NoGradGuard no_grad;
  for (const auto& group : param_groups())
    for (const at::Tensor& p : group.params())
      TORCH_CHECK(!p.grad().defined() || !p.grad().is_sparse(),
                  "Lamb does not support sparse gradients, consider SparseAdam instead.");
  const at::Tensor clip = clip_divisor();
  for (auto& group : param_groups()) {
    const LambOptions& o = options_of(group);
    const auto [beta1, beta2] = o.betas();
    const double beta3 = o.grad_averaging() ? 1 - beta1 : 1.0;
    const double weight_decay = o.weight_decay();
    const double lr = o.lr();
    for (const at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = state()[p.unsafeGetTensorImpl()];
      if (slot == nullptr) {
        auto fresh = std::make_unique<LambParamState>();
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      auto& s = static_cast<LambParamState&>(*slot);
      s.step(s.step() + 1);
      // Python floats: pow(beta, step) as Python's `beta ** step` computes it.
      const auto step = static_cast<double>(s.step());
      const double bias_correction1 = o.bias_correction() ? 1 - std::pow(beta1, step) : 1.0;
      const double bias_correction2 = o.bias_correction() ? 1 - std::pow(beta2, step) : 1.0;

      // Clipped out of place: p.grad stays as the backward left it.
      const at::Tensor grad = clip.defined() ? p.grad() / clip : p.grad();
      at::Tensor exp_avg = s.exp_avg();
      at::Tensor exp_avg_sq = s.exp_avg_sq();
      if (beta3 == 1 - beta1) {
        exp_avg.lerp_(grad, beta3);
      } else {
        exp_avg.mul_(beta1).add_(grad, beta3);
      }
      exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);

      const at::Tensor denom = (exp_avg_sq.sqrt() / std::pow(bias_correction2, 0.5)).add_(o.eps());
      at::Tensor update = (exp_avg / bias_correction1).div_(denom);
      // Decay inside the trust ratio (timm's default decoupled_decay = False): it is part of the
      // update whose norm the ratio divides by.
      if (weight_decay != 0) update.add_(p, weight_decay);
      // Layer-wise adaptation only where weight decay applies, unless always_adapt (timm).
      if (weight_decay != 0 || o.always_adapt()) {
        const at::Tensor w_norm = at::linalg_vector_norm(p, 2.0);
        update.mul_(lamb_trust_ratio(w_norm, at::linalg_vector_norm(update, 2.0), o.trust_clip()));
      }
      p.add_(update, -lr);
    }
  }
  return loss;
}

void Lamb::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<LambParamState, LambOptions>(archive, *this);
}

void Lamb::load(torch::serialize::InputArchive& archive) {
  torch::optim::serialize<LambParamState, LambOptions>(archive, *this);
}

}  // namespace tp::detail
