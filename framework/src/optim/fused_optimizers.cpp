// The fused SGD, the lr staging every fused optimizer shares, the helpers of fused_common.h and
// the factory's question whether a kernel applies. Adam and AdamW are fused_adam.cpp's.
#include "fused_optimizers.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <map>
#include <optional>
#include <utility>

#include "fused_common.h"
#include "tp/framework/error.h"

namespace tp {

DeviceStepOptimizer* device_step(torch::optim::Optimizer& optimizer) {
  return dynamic_cast<DeviceStepOptimizer*>(&optimizer);
}

namespace detail {

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

void check_may_start_state(bool forbidden, const char* optimizer) {
  TP_CHECK(!forbidden, optimizer, " (fused): a parameter received its first gradient inside a captured CUDA graph, "
           "where its new optimizer state would be re-initialised by every replay. Every trainable parameter must get "
           "a gradient in the eager warm-up steps before capture; set run.cuda_graphs = \"off\" for a model whose "
           "parameters join later.");
}

torch::Tensor evaluate_closure(const torch::optim::Optimizer::LossClosure& closure) {
  if (closure == nullptr) return {};
  at::AutoGradMode enable_grad(true);
  return closure();
}

namespace {

struct SgdBucket {
  std::vector<at::Tensor> params, grads, buffers;
};

}  // namespace

void DeviceLearningRates::stage(torch::optim::Optimizer& optimizer) {
  auto& groups = optimizer.param_groups();
  lrs_.resize(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].params().empty() || !groups[g].params().front().is_cuda()) continue;
    if (!lrs_[g].defined())
      lrs_[g] = at::empty({}, at::TensorOptions().dtype(at::kFloat).device(groups[g].params().front().device()));
    // A kernel launch with the value as its argument: no host sync, and never inside a capture,
    // so a replay reads whatever the schedule set last.
    lrs_[g].fill_(groups[g].options().get_lr());
  }
}

const at::Tensor& DeviceLearningRates::of(size_t index) const {
  static const at::Tensor kNone;
  return index < lrs_.size() ? lrs_[index] : kNone;
}

torch::Tensor FusedSGD::step(LossClosure closure) {
  const torch::Tensor loss = evaluate_closure(closure);
  stage_learning_rates();
  step_on_device(at::Tensor());
  return loss;
}

bool FusedSGD::starts_state() const {
  for (const auto& group : param_groups_) {
    if (static_cast<const torch::optim::SGDOptions&>(group.options()).momentum() == 0) continue;
    // Asked before a step too, when no gradient exists yet: until the group's first update, its
    // first momentum step is still to come; after it, only a parameter that now has a gradient
    // and no buffer starts one (one that never gets a gradient never does).
    bool any_buffer = false, missing = false;
    for (const at::Tensor& p : group.params()) {
      const auto it = state_.find(p.unsafeGetTensorImpl());
      const bool buffer =
          it != state_.end() && static_cast<const torch::optim::SGDParamState&>(*it->second).momentum_buffer().defined();
      any_buffer |= buffer;
      missing |= p.grad().defined() && !buffer;
    }
    if (!any_buffer || missing) return true;
  }
  return false;
}

void FusedSGD::step_on_device(const at::Tensor& found_inf) {
  torch::NoGradGuard no_grad;
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    auto& group = param_groups_[g];
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
        if (is_first) check_may_start_state(forbid_new_state_, "SGD");
        s.momentum_buffer(is_first ? at::empty_like(p) : like_param(s.momentum_buffer(), p));
        buffer = s.momentum_buffer();
      }
      SgdBucket& b = (is_first ? first : running)[bucket_key(p)];
      b.params.push_back(p);
      b.grads.push_back(checked_grad(p, "SGD"));
      if (momentum) b.buffers.push_back(std::move(buffer));
    }
    // The lr: the staged device tensor on CUDA, the option itself on the CPU (two overloads).
    const auto kernel = [&](SgdBucket& b, bool is_first_step, const auto& lr) {
      at::_fused_sgd_(b.params, b.grads, b.buffers, o.weight_decay(), o.momentum(), lr, o.dampening(), o.nesterov(),
                      /*maximize=*/false, is_first_step, std::nullopt, optional_tensor(found_inf));
    };
    const at::Tensor& lr = lrs_.of(g);
    for (auto* buckets : {&first, &running})
      for (auto& [key, b] : *buckets) {
        if (lr.defined()) kernel(b, buckets == &first, lr);
        else kernel(b, buckets == &first, o.lr());
      }
  }
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

}  // namespace detail
}  // namespace tp
