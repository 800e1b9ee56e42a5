// The fused Adam and AdamW (fused_optimizers.h): state and step counts as torch::optim's loop keeps
// them, the counts also as float32 tensors beside the parameters, which the update itself
// advances, so an update can run with no host value (a CUDA graph replays it).
#include <ATen/ATen.h>

#include <map>
#include <utility>

#include "fused_common.h"
#include "fused_optimizers.h"

namespace tp::detail {

struct AdamKernel {
  static constexpr const char* kName = "Adam";
  template <typename... Args>
  void operator()(Args&&... args) const {
    at::_fused_adam_(std::forward<Args>(args)...);
  }
};

struct AdamWKernel {
  static constexpr const char* kName = "AdamW";
  template <typename... Args>
  void operator()(Args&&... args) const {
    at::_fused_adamw_(std::forward<Args>(args)...);
  }
};

/// One fused call's lists: the parameters of one device and dtype with their state.
struct AdamBucket {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
};

template <typename Base, typename State, typename Options, typename Kernel>
torch::Tensor FusedAdamFamily<Base, State, Options, Kernel>::step(torch::optim::Optimizer::LossClosure closure) {
  const torch::Tensor loss = evaluate_closure(closure);
  stage_learning_rates();
  step_on_device(at::Tensor());
  // The host mirror of the counts the update just advanced on the device (a host-decided step).
  for (auto& group : this->param_groups())
    for (const at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& s = static_cast<State&>(*this->state().at(p.unsafeGetTensorImpl()));
      s.step(s.step() + 1);
    }
  return loss;
}

// One fused update of every group. State, initialisation and the step count are those of
// torch::optim::Adam/AdamW::step(), so either class can continue from the other's state.
template <typename Base, typename State, typename Options, typename Kernel>
void FusedAdamFamily<Base, State, Options, Kernel>::step_on_device(const at::Tensor& found_inf) {
  torch::NoGradGuard no_grad;
  auto& groups = this->param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& o = static_cast<const Options&>(groups[g].options());
    std::map<BucketKey, AdamBucket> buckets;
    for (const at::Tensor& p : groups[g].params()) {
      if (!p.grad().defined()) continue;
      auto& slot = this->state()[p.unsafeGetTensorImpl()];
      if (slot == nullptr) {
        check_may_start_state(forbid_new_state_, Kernel::kName);
        auto fresh = std::make_unique<State>();
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      auto& s = static_cast<State&>(*slot);
      // amsgrad switched on after the state was made (the loop would fail on the missing tensor).
      if (o.amsgrad() && !s.max_exp_avg_sq().defined()) {
        check_may_start_state(forbid_new_state_, Kernel::kName);
        s.max_exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
      }
      s.exp_avg(like_param(s.exp_avg(), p));
      s.exp_avg_sq(like_param(s.exp_avg_sq(), p));
      AdamBucket& b = buckets[bucket_key(p)];
      b.params.push_back(p);
      b.grads.push_back(checked_grad(p, Kernel::kName));
      b.exp_avgs.push_back(s.exp_avg());
      b.exp_avg_sqs.push_back(s.exp_avg_sq());
      if (o.amsgrad()) {
        s.max_exp_avg_sq(like_param(s.max_exp_avg_sq(), p));
        b.max_exp_avg_sqs.push_back(s.max_exp_avg_sq());
      }
      b.steps.push_back(device_step_of(p, s.step()));
    }
    const auto [beta1, beta2] = o.betas();
    const at::Tensor& lr = lrs_.of(g);
    for (auto& [key, b] : buckets) {
      // The loop increments before computing the bias corrections; the kernel reads the
      // incremented counts. A skipped update takes its increment back, as Python's fused path.
      at::_foreach_add_(b.steps, 1);
      // The lr: the staged device tensor on CUDA, the option itself on the CPU (two overloads).
      const auto run = [&](const auto& rate) {
        Kernel()(b.params, b.grads, b.exp_avgs, b.exp_avg_sqs, b.max_exp_avg_sqs, b.steps, rate, beta1, beta2,
                 o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false, std::nullopt, optional_tensor(found_inf));
      };
      if (lr.defined()) run(lr);
      else run(o.lr());
      if (found_inf.defined())
        at::_foreach_sub_(b.steps, std::vector<at::Tensor>(b.steps.size(), found_inf.to(b.steps.front().device())));
    }
  }
}

template <typename Base, typename State, typename Options, typename Kernel>
at::Tensor& FusedAdamFamily<Base, State, Options, Kernel>::device_step_of(const at::Tensor& param, int64_t host_step) {
  at::Tensor& step = device_steps_[param.unsafeGetTensorImpl()];
  // float32, as Python keeps fused step counts: exact up to 2^24 steps.
  if (!step.defined()) {
    check_may_start_state(forbid_new_state_, Kernel::kName);
    step = at::full({}, static_cast<double>(host_step), at::TensorOptions().dtype(at::kFloat).device(param.device()));
  }
  return step;
}

template <typename Base, typename State, typename Options, typename Kernel>
void FusedAdamFamily<Base, State, Options, Kernel>::save(torch::serialize::OutputArchive& archive) const {
  // The state objects are the archive; a device-only update (a graph replay) advanced only the
  // device counts. The objects sit behind unique_ptrs, so this const save may refresh them.
  std::vector<std::pair<State*, at::Tensor>> pending;
  for (const auto& group : this->param_groups())
    for (const at::Tensor& p : group.params()) {
      const auto step = device_steps_.find(p.unsafeGetTensorImpl());
      const auto state = this->state().find(p.unsafeGetTensorImpl());
      if (step != device_steps_.end() && state != this->state().end())
        pending.emplace_back(static_cast<State*>(state->second.get()), step->second);
    }
  if (!pending.empty()) {
    // One host read of every count (a sync on CUDA, once per save): gathered on the first count's
    // device (device-to-device copies queue without a wait), stacked, copied once.
    std::vector<at::Tensor> counts;
    const c10::Device where = pending.front().second.device();
    for (const auto& [state, count] : pending) counts.push_back(count.to(where, at::kDouble, /*non_blocking=*/true));
    const at::Tensor host = at::stack(counts).cpu();
    const double* values = host.const_data_ptr<double>();
    for (size_t i = 0; i < pending.size(); ++i) pending[i].first->step(static_cast<int64_t>(values[i]));
  }
  Base::save(archive);
}

template <typename Base, typename State, typename Options, typename Kernel>
void FusedAdamFamily<Base, State, Options, Kernel>::load(torch::serialize::InputArchive& archive) {
  Base::load(archive);
  device_steps_.clear(); // made again from the loaded counts at the next update
}

template class FusedAdamFamily<torch::optim::Adam, torch::optim::AdamParamState, torch::optim::AdamOptions, AdamKernel>;
template class FusedAdamFamily<torch::optim::AdamW, torch::optim::AdamWParamState, torch::optim::AdamWOptions,
                               AdamWKernel>;

}  // namespace tp::detail
