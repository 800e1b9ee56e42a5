#include "fused_optimizers.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <map>
#include <tuple>
#include <utility>

namespace tp::detail {
namespace {

// The fused kernels take lists of one device and dtype (CUDA launches one multi-tensor kernel
// per list), so a group's tensors are bucketed like Python's _group_tensors_by_device_and_dtype.
using BucketKey = std::tuple<int, int, int>;  // device type, device index, dtype

BucketKey bucket_key(const at::Tensor& t) {
  return {static_cast<int>(t.device().type()), t.device().index(), static_cast<int>(t.scalar_type())};
}

// The CPU kernels walk param, grad and state with one linear index, so all must share the
// parameter's strides. Gradients follow the parameter's layout (the autograd layout contract)
// and fresh state is zeros_like(param), so this copies only state restored from a checkpoint
// for a parameter in another memory format (channels-last), and only once: the caller stores it.
at::Tensor like_param(const at::Tensor& t, const at::Tensor& param) {
  if (t.device() == param.device() && t.scalar_type() == param.scalar_type() && t.strides() == param.strides())
    return t;
  return at::empty_like(param).copy_(t);
}

at::Tensor checked_grad(const at::Tensor& param, const char* optimizer) {
  const at::Tensor& grad = param.grad();
  TORCH_CHECK(!grad.is_sparse(), optimizer, " (fused) does not support sparse gradients; use optim.implementation = "
              "\"for_loop\".");
  return like_param(grad, param);
}

struct SgdBucket {
  std::vector<at::Tensor> params, grads, buffers;
};

struct AdamBucket {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs;
  std::vector<float> steps;
};

// One fused Adam/AdamW update of `group`. State, initialisation and the step count are those of
// torch::optim::Adam/AdamW::step(), so either class can continue from the other's state.
template <typename State, typename Options, typename Kernel>
void fused_adam_group(torch::optim::OptimizerParamGroup& group,
                      ska::flat_hash_map<void*, std::unique_ptr<torch::optim::OptimizerParamState>>& states,
                      const char* name, Kernel kernel) {
  const auto& o = static_cast<const Options&>(group.options());
  std::map<BucketKey, AdamBucket> buckets;
  for (const at::Tensor& p : group.params()) {
    if (!p.grad().defined()) continue;
    auto& slot = states[p.unsafeGetTensorImpl()];
    if (slot == nullptr) {
      auto fresh = std::make_unique<State>();
      fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
      fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
      slot = std::move(fresh);
    }
    auto& s = static_cast<State&>(*slot);
    // amsgrad switched on after the state was made (the loop would fail on the missing tensor).
    if (o.amsgrad() && !s.max_exp_avg_sq().defined())
      s.max_exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
    s.exp_avg(like_param(s.exp_avg(), p));
    s.exp_avg_sq(like_param(s.exp_avg_sq(), p));
    // The loop increments before computing the bias corrections; Python's fused path adds 1 to
    // the step tensors before the kernel, which reads them.
    s.step(s.step() + 1);
    AdamBucket& b = buckets[bucket_key(p)];
    b.params.push_back(p);
    b.grads.push_back(checked_grad(p, name));
    b.exp_avgs.push_back(s.exp_avg());
    b.exp_avg_sqs.push_back(s.exp_avg_sq());
    if (o.amsgrad()) {
      s.max_exp_avg_sq(like_param(s.max_exp_avg_sq(), p));
      b.max_exp_avg_sqs.push_back(s.max_exp_avg_sq());
    }
    // float32, as Python keeps fused step counts: exact up to 2^24 steps.
    b.steps.push_back(static_cast<float>(s.step()));
  }
  const auto [beta1, beta2] = o.betas();
  for (auto& [key, b] : buckets) {
    // One host-to-device copy of the bucket's step counts; the kernels want one 0-d tensor each.
    const at::Tensor steps = at::tensor(b.steps, at::kFloat).to(b.params.front().device());
    const std::vector<at::Tensor> step_list = steps.unbind(0);
    kernel(b.params, b.grads, b.exp_avgs, b.exp_avg_sqs, b.max_exp_avg_sqs, step_list, o.lr(), beta1, beta2,
           o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false);
  }
}

/// The torch::optim contract: a closure, when given, re-evaluates the loss with grad enabled.
torch::Tensor evaluate_closure(const torch::optim::Optimizer::LossClosure& closure) {
  if (closure == nullptr) return {};
  at::AutoGradMode enable_grad(true);
  return closure();
}

}  // namespace

torch::Tensor FusedSGD::step(LossClosure closure) {
  const torch::Tensor loss = evaluate_closure(closure);
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    const bool momentum = o.momentum() != 0;
    // The kernel's is_first_step covers a whole call, so parameters whose momentum buffer starts
    // now (buffer = gradient, as the loop's clone) go into a call of their own.
    std::map<BucketKey, SgdBucket> first, running;
    for (const at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      bool is_first = false;
      at::Tensor buffer;
      if (momentum) {
        auto& slot = state_[p.unsafeGetTensorImpl()];
        if (slot == nullptr) slot = std::make_unique<torch::optim::SGDParamState>();
        auto& s = static_cast<torch::optim::SGDParamState&>(*slot);
        is_first = !s.momentum_buffer().defined();
        s.momentum_buffer(is_first ? at::empty_like(p) : like_param(s.momentum_buffer(), p));
        buffer = s.momentum_buffer();
      }
      SgdBucket& b = (is_first ? first : running)[bucket_key(p)];
      b.params.push_back(p);
      b.grads.push_back(checked_grad(p, "SGD"));
      if (momentum) b.buffers.push_back(std::move(buffer));
    }
    for (auto* buckets : {&first, &running}) {
      for (auto& [key, b] : *buckets)
        at::_fused_sgd_(b.params, b.grads, b.buffers, o.weight_decay(), o.momentum(), o.lr(), o.dampening(),
                        o.nesterov(), /*maximize=*/false, /*is_first_step=*/buckets == &first);
    }
  }
  return loss;
}

torch::Tensor FusedAdam::step(LossClosure closure) {
  const torch::Tensor loss = evaluate_closure(closure);
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    fused_adam_group<torch::optim::AdamParamState, torch::optim::AdamOptions>(
        group, state_, "Adam", [](auto&&... args) { at::_fused_adam_(std::forward<decltype(args)>(args)...); });
  }
  return loss;
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  const torch::Tensor loss = evaluate_closure(closure);
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    fused_adam_group<torch::optim::AdamWParamState, torch::optim::AdamWOptions>(
        group, state_, "AdamW", [](auto&&... args) { at::_fused_adamw_(std::forward<decltype(args)>(args)...); });
  }
  return loss;
}

std::string fused_unsupported_reason(const at::Tensor& param) {
  const c10::DeviceType device = param.device().type();
  if (device != c10::DeviceType::CPU && device != c10::DeviceType::CUDA)
    return "is on " + param.device().str() + ", where LibTorch has no fused optimizer kernels (CPU and CUDA have)";
  const at::ScalarType dtype = param.scalar_type();
  if (dtype != at::kFloat && dtype != at::kDouble && dtype != at::kHalf && dtype != at::kBFloat16)
    return std::string("has dtype ") + c10::toString(dtype) + "; the fused kernels take float, double, half and bfloat16";
  if (param.layout() != c10::kStrided || !param.is_non_overlapping_and_dense())
    return "is not a dense tensor; the fused kernels update the parameter's memory as one block";
  return {};
}

}  // namespace tp::detail
