#include "fused_optimizers.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "tp/framework/error.h"

namespace tp {

DeviceStepOptimizer* device_step(torch::optim::Optimizer& optimizer) {
  return dynamic_cast<DeviceStepOptimizer*>(&optimizer);
}

namespace detail {
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

void check_may_start_state(bool forbidden, const char* optimizer) {
  TP_CHECK(!forbidden, optimizer, " (fused): a parameter received its first gradient inside a captured CUDA graph, "
           "where its new optimizer state would be re-initialised by every replay. Every trainable parameter must get "
           "a gradient in the eager warm-up steps before capture; set run.cuda_graphs = \"off\" for a model whose "
           "parameters join later.");
}

std::optional<at::Tensor> optional_tensor(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

struct SgdBucket {
  std::vector<at::Tensor> params, grads, buffers;
};

struct AdamBucket {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
};

/// The torch::optim contract: a closure, when given, re-evaluates the loss with grad enabled.
torch::Tensor evaluate_closure(const torch::optim::Optimizer::LossClosure& closure) {
  if (closure == nullptr) return {};
  at::AutoGradMode enable_grad(true);
  return closure();
}

/// Adam's and AdamW's per-parameter state of `group` made ready for a fused update, bucketed.
template <typename State, typename Options>
std::map<BucketKey, AdamBucket> adam_buckets(torch::optim::OptimizerParamGroup& group,
                                             ska::flat_hash_map<void*, std::unique_ptr<torch::optim::OptimizerParamState>>& states,
                                             bool forbid_new_state, const char* name,
                                             const std::function<at::Tensor&(const at::Tensor&, int64_t)>& step_of) {
  const auto& o = static_cast<const Options&>(group.options());
  std::map<BucketKey, AdamBucket> buckets;
  for (const at::Tensor& p : group.params()) {
    if (!p.grad().defined()) continue;
    auto& slot = states[p.unsafeGetTensorImpl()];
    if (slot == nullptr) {
      check_may_start_state(forbid_new_state, name);
      auto fresh = std::make_unique<State>();
      fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
      fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
      slot = std::move(fresh);
    }
    auto& s = static_cast<State&>(*slot);
    // amsgrad switched on after the state was made (the loop would fail on the missing tensor).
    if (o.amsgrad() && !s.max_exp_avg_sq().defined()) {
      check_may_start_state(forbid_new_state, name);
      s.max_exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
    }
    s.exp_avg(like_param(s.exp_avg(), p));
    s.exp_avg_sq(like_param(s.exp_avg_sq(), p));
    AdamBucket& b = buckets[bucket_key(p)];
    b.params.push_back(p);
    b.grads.push_back(checked_grad(p, name));
    b.exp_avgs.push_back(s.exp_avg());
    b.exp_avg_sqs.push_back(s.exp_avg_sq());
    if (o.amsgrad()) {
      s.max_exp_avg_sq(like_param(s.max_exp_avg_sq(), p));
      b.max_exp_avg_sqs.push_back(s.max_exp_avg_sq());
    }
    b.steps.push_back(step_of(p, s.step()));
  }
  return buckets;
}

// One fused Adam/AdamW update of every group. State, initialisation and the step count are those
// of torch::optim::Adam/AdamW::step(), so either class can continue from the other's state.
template <typename State, typename Options, typename Kernel>
void fused_adam_step(torch::optim::Optimizer& optimizer, const DeviceLearningRates& lrs,
                     bool forbid_new_state, const at::Tensor& found_inf, const char* name,
                     const std::function<at::Tensor&(const at::Tensor&, int64_t)>& step_of, Kernel kernel) {
  torch::NoGradGuard no_grad;
  auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& o = static_cast<const Options&>(groups[g].options());
    auto buckets = adam_buckets<State, Options>(groups[g], optimizer.state(), forbid_new_state, name, step_of);
    const auto [beta1, beta2] = o.betas();
    for (auto& [key, b] : buckets) {
      // The loop increments before computing the bias corrections; the kernel reads the
      // incremented counts. A skipped update takes its increment back, as Python's fused path.
      at::_foreach_add_(b.steps, 1);
      const at::Tensor& lr = lrs.of(g);
      if (lr.defined())
        kernel(b.params, b.grads, b.exp_avgs, b.exp_avg_sqs, b.max_exp_avg_sqs, b.steps, lr, beta1, beta2,
               o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false, std::nullopt, optional_tensor(found_inf));
      else
        kernel(b.params, b.grads, b.exp_avgs, b.exp_avg_sqs, b.max_exp_avg_sqs, b.steps, o.lr(), beta1, beta2,
               o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false, std::nullopt, optional_tensor(found_inf));
      if (found_inf.defined())
        at::_foreach_sub_(b.steps, std::vector<at::Tensor>(b.steps.size(), found_inf.to(b.steps.front().device())));
    }
  }
}

/// The host mirror of the counts an update just advanced on the device (host-decided steps only).
template <typename State>
void count_host_steps(torch::optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups())
    for (const at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& s = static_cast<State&>(*optimizer.state().at(p.unsafeGetTensorImpl()));
      s.step(s.step() + 1);
    }
}

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
    // Asked before a step too, when no gradient exists yet: every trainable parameter will get one.
    for (const at::Tensor& p : group.params()) {
      if (!p.grad().defined() && !p.requires_grad()) continue;
      const auto it = state_.find(p.unsafeGetTensorImpl());
      if (it == state_.end() || !static_cast<const torch::optim::SGDParamState&>(*it->second).momentum_buffer().defined())
        return true;
    }
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
    const at::Tensor& lr = lrs_.of(g);
    for (auto* buckets : {&first, &running}) {
      const bool is_first_step = buckets == &first;
      for (auto& [key, b] : *buckets) {
        if (lr.defined())
          at::_fused_sgd_(b.params, b.grads, b.buffers, o.weight_decay(), o.momentum(), lr, o.dampening(), o.nesterov(),
                          /*maximize=*/false, is_first_step, std::nullopt, optional_tensor(found_inf));
        else
          at::_fused_sgd_(b.params, b.grads, b.buffers, o.weight_decay(), o.momentum(), o.lr(), o.dampening(),
                          o.nesterov(), /*maximize=*/false, is_first_step, std::nullopt, optional_tensor(found_inf));
      }
    }
  }
}

at::Tensor& FusedAdamSteps::device_step_of(const at::Tensor& param, int64_t host_step) {
  at::Tensor& step = device_steps_[param.unsafeGetTensorImpl()];
  // float32, as Python keeps fused step counts: exact up to 2^24 steps.
  if (!step.defined()) {
    check_may_start_state(forbid_new_state_, "Adam");
    step = at::full({}, static_cast<double>(host_step), at::TensorOptions().dtype(at::kFloat).device(param.device()));
  }
  return step;
}

void FusedAdamSteps::sync_host_steps(torch::optim::Optimizer& optimizer) const {
  // One host read of every count at once.
  std::vector<std::pair<torch::optim::OptimizerParamState*, at::Tensor>> pending;
  for (auto& group : optimizer.param_groups())
    for (const at::Tensor& p : group.params()) {
      const auto step = device_steps_.find(p.unsafeGetTensorImpl());
      const auto state = optimizer.state().find(p.unsafeGetTensorImpl());
      if (step != device_steps_.end() && state != optimizer.state().end())
        pending.emplace_back(state->second.get(), step->second);
    }
  if (pending.empty()) return;
  std::vector<at::Tensor> counts;
  for (const auto& [state, count] : pending) counts.push_back(count.reshape({1}).to(at::kCPU, at::kDouble));
  const at::Tensor host = at::cat(counts);
  const double* values = host.const_data_ptr<double>();
  for (size_t i = 0; i < pending.size(); ++i) {
    const auto count = static_cast<int64_t>(values[i]);
    // The two state classes are distinct types with the same step() member.
    if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(pending[i].first)) adam->step(count);
    else if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(pending[i].first)) adamw->step(count);
  }
}

torch::Tensor FusedAdam::step(LossClosure closure) {
  const torch::Tensor loss = evaluate_closure(closure);
  stage_learning_rates();
  step_on_device(at::Tensor());
  count_host_steps<torch::optim::AdamParamState>(*this);
  return loss;
}

void FusedAdam::step_on_device(const at::Tensor& found_inf) {
  fused_adam_step<torch::optim::AdamParamState, torch::optim::AdamOptions>(
      *this, lrs_, forbid_new_state_, found_inf, "Adam",
      [this](const at::Tensor& p, int64_t host_step) -> at::Tensor& { return device_step_of(p, host_step); },
      [](auto&&... args) { at::_fused_adam_(std::forward<decltype(args)>(args)...); });
}

void FusedAdam::save(torch::serialize::OutputArchive& archive) const {
  // The state objects are the archive; a device-only update (a graph replay) advanced only the
  // device counts. The objects sit behind unique_ptrs, so this const save may refresh them.
  sync_host_steps(const_cast<FusedAdam&>(*this));
  torch::optim::Adam::save(archive);
}

void FusedAdam::load(torch::serialize::InputArchive& archive) {
  torch::optim::Adam::load(archive);
  forget_device_steps();
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  const torch::Tensor loss = evaluate_closure(closure);
  stage_learning_rates();
  step_on_device(at::Tensor());
  count_host_steps<torch::optim::AdamWParamState>(*this);
  return loss;
}

void FusedAdamW::step_on_device(const at::Tensor& found_inf) {
  fused_adam_step<torch::optim::AdamWParamState, torch::optim::AdamWOptions>(
      *this, lrs_, forbid_new_state_, found_inf, "AdamW",
      [this](const at::Tensor& p, int64_t host_step) -> at::Tensor& { return device_step_of(p, host_step); },
      [](auto&&... args) { at::_fused_adamw_(std::forward<decltype(args)>(args)...); });
}

void FusedAdamW::save(torch::serialize::OutputArchive& archive) const {
  sync_host_steps(const_cast<FusedAdamW&>(*this));
  torch::optim::AdamW::save(archive);
}

void FusedAdamW::load(torch::serialize::InputArchive& archive) {
  torch::optim::AdamW::load(archive);
  forget_device_steps();
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
