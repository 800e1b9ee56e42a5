// The fused Adam and AdamW (fused_optimizers.h): state and step counts as torch::optim's loop keeps
// them, the counts also as float32 tensors beside the parameters, which the update itself
// advances, so an update can run with no host value (a CUDA graph replays it).
#include <ATen/ATen.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <functional>
#include <map>
#include <utility>

#include "fused_common.h"
#include "fused_optimizers.h"

namespace tp::detail {
namespace {

struct AdamBucket {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
};

using StepOf = std::function<at::Tensor&(const at::Tensor& param, int64_t host_step)>;

/// Adam's and AdamW's per-parameter state of `group` made ready for a fused update, bucketed.
template <typename State, typename Options>
std::map<BucketKey, AdamBucket> adam_buckets(torch::optim::OptimizerParamGroup& group,
                                             ska::flat_hash_map<void*, std::unique_ptr<torch::optim::OptimizerParamState>>& states,
                                             bool forbid_new_state, const char* name, const StepOf& step_of) {
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
void fused_adam_step(torch::optim::Optimizer& optimizer, const DeviceLearningRates& lrs, bool forbid_new_state,
                     const at::Tensor& found_inf, const char* name, const StepOf& step_of, Kernel kernel) {
  torch::NoGradGuard no_grad;
  auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& o = static_cast<const Options&>(groups[g].options());
    auto buckets = adam_buckets<State, Options>(groups[g], optimizer.state(), forbid_new_state, name, step_of);
    const auto [beta1, beta2] = o.betas();
    const at::Tensor& lr = lrs.of(g);
    for (auto& [key, b] : buckets) {
      // The loop increments before computing the bias corrections; the kernel reads the
      // incremented counts. A skipped update takes its increment back, as Python's fused path.
      at::_foreach_add_(b.steps, 1);
      // The lr: the staged device tensor on CUDA, the option itself on the CPU (two overloads).
      const auto run = [&](const auto& rate) {
        kernel(b.params, b.grads, b.exp_avgs, b.exp_avg_sqs, b.max_exp_avg_sqs, b.steps, rate, beta1, beta2,
               o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false, std::nullopt, optional_tensor(found_inf));
      };
      if (lr.defined()) run(lr);
      else run(o.lr());
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

at::Tensor& FusedAdamSteps::device_step_of(const at::Tensor& param, int64_t host_step, const char* optimizer) {
  at::Tensor& step = device_steps_[param.unsafeGetTensorImpl()];
  // float32, as Python keeps fused step counts: exact up to 2^24 steps.
  if (!step.defined()) {
    check_may_start_state(forbid_new_state_, optimizer);
    step = at::full({}, static_cast<double>(host_step), at::TensorOptions().dtype(at::kFloat).device(param.device()));
  }
  return step;
}

void FusedAdamSteps::sync_host_steps(torch::optim::Optimizer& optimizer) const {
  std::vector<std::pair<torch::optim::OptimizerParamState*, at::Tensor>> pending;
  for (auto& group : optimizer.param_groups())
    for (const at::Tensor& p : group.params()) {
      const auto step = device_steps_.find(p.unsafeGetTensorImpl());
      const auto state = optimizer.state().find(p.unsafeGetTensorImpl());
      if (step != device_steps_.end() && state != optimizer.state().end())
        pending.emplace_back(state->second.get(), step->second);
    }
  if (pending.empty()) return;
  // One host read of every count (a sync on CUDA, once per save): gathered on the first count's
  // device (device-to-device copies queue without a wait), stacked, copied once.
  std::vector<at::Tensor> counts;
  const c10::Device where = pending.front().second.device();
  for (const auto& [state, count] : pending) counts.push_back(count.to(where, at::kDouble, /*non_blocking=*/true));
  const at::Tensor host = at::stack(counts).cpu();
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
      [this](const at::Tensor& p, int64_t host_step) -> at::Tensor& { return device_step_of(p, host_step, "Adam"); },
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
      [this](const at::Tensor& p, int64_t host_step) -> at::Tensor& { return device_step_of(p, host_step, "AdamW"); },
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

}  // namespace tp::detail
