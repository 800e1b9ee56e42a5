// Lion's update (lion.h): timm 1.0.31's _single_tensor_lion, op for op, so that on the CPU the
// same inputs give the same bits (lion_timm_oracle measures it against timm).
#include "lion.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/optim/serialize.h>

#include <utility>

namespace tp::detail {

LionOptions::LionOptions(double lr) : torch::optim::AdamWOptions(lr) {
  // timm's Lion defaults; AdamW's are (0.9, 0.999) and 0.01.
  betas({0.9, 0.99});
  weight_decay(0.0);
}

std::unique_ptr<torch::optim::OptimizerOptions> LionOptions::clone() const {
  return std::make_unique<LionOptions>(*this);
}

void LionOptions::serialize(torch::serialize::OutputArchive& archive) const {
  torch::optim::AdamWOptions::serialize(archive);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(caution);
}

void LionOptions::serialize(torch::serialize::InputArchive& archive) {
  torch::optim::AdamWOptions::serialize(archive);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, caution);
}

void LionParamState::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg);
}

void LionParamState::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(at::Tensor, exp_avg);
}

Lion::Lion(const std::vector<torch::optim::OptimizerParamGroup>& param_groups, const LionOptions& defaults)
    : torch::optim::Optimizer(param_groups, std::make_unique<LionOptions>(defaults)) {
  const auto [beta1, beta2] = defaults.betas();
  TORCH_CHECK(defaults.lr() >= 0, "Invalid learning rate: ", defaults.lr());
  TORCH_CHECK(defaults.weight_decay() >= 0, "Invalid weight_decay value: ", defaults.weight_decay());
  TORCH_CHECK(0 <= beta1 && beta1 < 1, "Invalid beta parameter at index 0: ", beta1);
  TORCH_CHECK(0 <= beta2 && beta2 < 1, "Invalid beta parameter at index 1: ", beta2);
}

torch::Tensor Lion::step(LossClosure closure) {
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const LionOptions&>(group.options());
    const auto [beta1, beta2] = o.betas();
    const double lr = o.lr();
    for (const at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      const at::Tensor grad = p.grad();
      TORCH_CHECK(!grad.is_sparse(), "Lion does not support sparse gradients");
      auto& slot = state()[p.unsafeGetTensorImpl()];
      if (slot == nullptr) {
        auto fresh = std::make_unique<LionParamState>();
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      at::Tensor exp_avg = static_cast<LionParamState&>(*slot).exp_avg();
      // Decoupled decay first, on the weight the update then moves (timm multiplies by 1 even
      // without decay; skipping it changes no bit).
      if (o.weight_decay() != 0) p.mul_(1 - lr * o.weight_decay());
      at::Tensor update = exp_avg.lerp(grad, 1 - beta1).sign_();
      if (o.caution()) {
        // Cautious Optimizers (arXiv 2411.16085): kept only where the update's sign agrees with the
        // gradient's, so no element steps uphill; divided by the kept fraction to keep its size.
        at::Tensor mask = (update * grad > 0).to(grad.scalar_type());
        mask.div_(mask.mean().clamp_(1e-3));
        update.mul_(mask);
      }
      p.add_(update, -lr);
      exp_avg.lerp_(grad, 1 - beta2);
    }
  }
  return loss;
}

void Lion::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<LionParamState, LionOptions>(archive, *this);
}

void Lion::load(torch::serialize::InputArchive& archive) {
  torch::optim::serialize<LionParamState, LionOptions>(archive, *this);
}

}  // namespace tp::detail
