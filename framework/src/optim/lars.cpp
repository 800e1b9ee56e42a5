// LARS's update (lars.h): timm 1.0.31's _single_tensor_lars and _lars_trust_ratio, op for op, so
// that on the CPU the same inputs give the same bits (lars_timm_oracle.py measures it).
#include "lars.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/optim/serialize.h>

#include <optional>
#include <utility>

namespace tp::detail {

LarsOptions::LarsOptions(double lr) : torch::optim::SGDOptions(lr) {}

std::unique_ptr<torch::optim::OptimizerOptions> LarsOptions::clone() const {
  return std::make_unique<LarsOptions>(*this);
}

void LarsOptions::serialize(torch::serialize::OutputArchive& archive) const {
  torch::optim::SGDOptions::serialize(archive);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(trust_coeff);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(eps);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(trust_clip);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(always_adapt);
}

void LarsOptions::serialize(torch::serialize::InputArchive& archive) {
  torch::optim::SGDOptions::serialize(archive);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, trust_coeff);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, eps);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, trust_clip);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, always_adapt);
}

namespace {

// timm's _lars_trust_ratio: trust_coeff x ||w|| / (||g|| + wd x ||w|| + eps), 1 where either norm
// is 0 (a zero-initialised weight or a zero gradient: the step is the plain SGD one); with
// trust_clip (LARC) min(ratio / lr, 1). The nested where keeps it on the device.
at::Tensor lars_trust_ratio(const at::Tensor& w_norm, const at::Tensor& g_norm, const LarsOptions& o) {
  at::Tensor ratio = o.trust_coeff() * w_norm / (g_norm + w_norm * o.weight_decay() + o.eps());
  ratio = at::where(w_norm > 0, at::where(g_norm > 0, ratio, 1.0), 1.0);
  if (o.trust_clip()) ratio = at::clamp(ratio / o.lr(), std::nullopt, 1.0);
  return ratio;
}

const LarsOptions& lars_group_options(const torch::optim::OptimizerParamGroup& group) {
  return static_cast<const LarsOptions&>(group.options());
}

}  // namespace

Lars::Lars(const std::vector<torch::optim::OptimizerParamGroup>& param_groups, const LarsOptions& defaults)
    : torch::optim::Optimizer(param_groups, std::make_unique<LarsOptions>(defaults)) {
  TORCH_CHECK(defaults.lr() >= 0, "Invalid learning rate: ", defaults.lr());
  TORCH_CHECK(defaults.momentum() >= 0, "Invalid momentum value: ", defaults.momentum());
  TORCH_CHECK(defaults.weight_decay() >= 0, "Invalid weight_decay value: ", defaults.weight_decay());
  TORCH_CHECK(defaults.eps() >= 0, "Invalid epsilon value: ", defaults.eps());
  TORCH_CHECK(defaults.trust_coeff() > 0, "Invalid trust_coeff value: ", defaults.trust_coeff());
  TORCH_CHECK(!defaults.nesterov() || (defaults.momentum() > 0 && defaults.dampening() == 0),
              "Nesterov momentum requires a momentum and zero dampening");
}

torch::Tensor Lars::step(LossClosure closure) {
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups()) {
    const LarsOptions& o = lars_group_options(group);
    const double weight_decay = o.weight_decay();
    const double momentum = o.momentum();
    for (const at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      TORCH_CHECK(!p.grad().is_sparse(), "Lars does not support sparse gradients.");
      at::Tensor grad = p.grad();
      // Adaptation and decay only where the group decays, unless always_adapt (timm); out of
      // place, so p.grad stays as the backward left it.
      if (weight_decay != 0 || o.always_adapt()) {
        const at::Tensor ratio = lars_trust_ratio(at::linalg_vector_norm(p, 2.0), at::linalg_vector_norm(grad, 2.0), o);
        grad = grad.add(p, weight_decay).mul_(ratio);
      }
      if (momentum != 0) {
        auto& slot = state()[p.unsafeGetTensorImpl()];
        at::Tensor buf;
        if (slot == nullptr) {
          // The first update fills the buffer with the step itself (no dampening), as SGD does.
          buf = grad.clone().detach();
          auto fresh = std::make_unique<torch::optim::SGDParamState>();
          fresh->momentum_buffer(buf);
          slot = std::move(fresh);
        } else {
          buf = static_cast<torch::optim::SGDParamState&>(*slot).momentum_buffer();
          buf.mul_(momentum).add_(grad, 1 - o.dampening());
        }
        grad = o.nesterov() ? grad.add(buf, momentum) : buf;
      }
      p.add_(grad, -o.lr());
    }
  }
  return loss;
}

void Lars::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<torch::optim::SGDParamState, LarsOptions>(archive, *this);
}

void Lars::load(torch::serialize::InputArchive& archive) {
  torch::optim::serialize<torch::optim::SGDParamState, LarsOptions>(archive, *this);
}

}  // namespace tp::detail
