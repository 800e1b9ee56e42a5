// The gradients check: one forward and backward of the training step's loss (sum / count, train
// mode) on one batch, then every trainable parameter the model lends (visit_state, not a buffer,
// requires_grad) must hold a gradient that is defined, finite and not all zero. A layer the
// forward never reaches, an output computed under no_grad or through .detach(), or a parameter
// the model keeps out of the graph shows up here instead of as a layer that silently never
// trains. A parameter whose gradient is zero only because a scale downstream starts at zero
// (zero_init_residual's last BatchNorm weight, a layer scale of 0) gets one after a single SGD
// step: the check takes that step on a copy of the state and asks again, then restores the
// weights. Cost: one forward and backward pass (two when some gradient is zero).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "verify/verify.h"

namespace tp::cli::verify {
namespace {

/// "a, b, c" of at most 4 names, then "and N more".
/// One forward and backward of the training loss (sum / count, train mode) into fresh gradients.
void forward_backward(VerifyContext& context, const std::vector<const StateTensor*>& trainable) {
  RunComponents& parts = context.parts();
  for (const StateTensor* s : trainable) s->tensor.mutable_grad() = at::Tensor();
  at::AutoGradMode grad_mode(true);
  parts.model->set_training(true);
  const NamedTensors outputs = parts.model->forward(context.first_batch());
  const LossTerms loss = parts.loss->forward(outputs, context.first_batch());
  (loss.sum / loss.count.to(loss.sum.scalar_type())).backward();
  parts.model->set_training(false);
}

bool all_zero(const at::Tensor& grad) { return !grad.defined() || !grad.ne(0).any().item<bool>(); }

/// Of `zero` (names of parameters with an all-zero gradient), those still at zero after one plain
/// SGD step at optim.lr on every trainable parameter. The model's state (buffers too: the
/// train-mode forward moves BatchNorm statistics) is restored afterwards.
std::vector<std::string> zero_after_one_step(VerifyContext& context, const std::vector<const StateTensor*>& trainable,
                                             const std::vector<std::string>& zero) {
  const std::vector<StateTensor>& state = context.model_state();
  std::vector<at::Tensor> saved;
  for (const StateTensor& s : state) saved.push_back(s.tensor.detach().clone());
  {
    c10::NoGradGuard no_grad;
    for (const StateTensor* s : trainable)
      if (s->tensor.grad().defined()) s->tensor.sub_(s->tensor.grad() * context.config().optim.lr);
  }
  forward_backward(context, trainable);
  std::vector<std::string> still;
  for (const StateTensor* s : trainable)
    if (std::find(zero.begin(), zero.end(), s->name) != zero.end() && all_zero(s->tensor.grad())) still.push_back(s->name);
  c10::NoGradGuard no_grad;
  for (std::size_t i = 0; i < state.size(); ++i) state[i].tensor.detach().copy_(saved[i]);
  return still;
}

std::string name_list(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < 4; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > 4) text += " and " + std::to_string(names.size() - 4) + " more";
  return text;
}

}  // namespace

CheckResult check_gradients(VerifyContext& context) {
  RunComponents& parts = context.parts();
  const std::vector<StateTensor>& state = context.model_state();
  const NamedTensors& batch = context.first_batch();
  std::vector<const StateTensor*> trainable;
  for (const StateTensor& s : state)
    if (!s.is_buffer && s.tensor.requires_grad()) trainable.push_back(&s);
  CheckResult row("gradients", "0: finite, non-zero");
  if (trainable.empty()) {
    row.status = Status::kFail;
    row.measured = "no trainable parameter";
    row.reason = parts.model->id() + " lends no parameter that requires a gradient (visit_state): nothing would train";
    return row;
  }
  forward_backward(context, trainable);
  std::vector<std::string> missing, non_finite, zero;
  for (const StateTensor* s : trainable) {
    const at::Tensor& grad = s->tensor.grad();
    if (!grad.defined()) missing.push_back(s->name);
    else if (!at::isfinite(grad).all().item<bool>()) non_finite.push_back(s->name); // syncs, per parameter
    else if (all_zero(grad)) zero.push_back(s->name);
  }
  const std::size_t zero_at_start = zero.size();
  if (!zero.empty() && non_finite.empty()) zero = zero_after_one_step(context, trainable, zero);
  if (zero.size() < zero_at_start)
    row.notes.emplace_back(std::to_string(zero_at_start - zero.size()) + " get an all-zero gradient only at the first " +
                           "step and a non-zero one after one SGD step (a scale downstream that starts at zero, "
                           "such as zero_init_residual's last BatchNorm weight): by design");
  const size_t bad = missing.size() + non_finite.size() + zero.size();
  row.measured = std::to_string(bad) + " of " + std::to_string(trainable.size()) + " tensors";
  if (bad == 0) {
    row.reason = "one forward/backward (train mode) on a batch of " + std::to_string(batch.front().second.size(0)) +
                 ": all " + std::to_string(trainable.size()) + " trainable parameter tensors get a finite, non-zero gradient";
    return row;
  }
  row.status = Status::kFail;
  if (!missing.empty())
    row.notes.emplace_back(std::to_string(missing.size()) + " get no gradient: " + name_list(missing) +
                        " (a layer the forward never uses, or an output computed under no_grad or through "
                        ".detach(); under data-parallel training they also need dist.find_unused_parameters)");
  if (!non_finite.empty())
    row.notes.emplace_back(std::to_string(non_finite.size()) + " get a NaN or Inf gradient: " + name_list(non_finite) +
                        " (a log, square root or division of zero, an overflow)");
  if (!zero.empty())
    row.notes.emplace_back(std::to_string(zero.size()) + " get an all-zero gradient: " + name_list(zero) +
                        " (a multiplication by zero, a ReLU dead for the whole batch, a clamp that saturates)");
  row.reason = parts.model->id() + ": " + std::to_string(bad) + " trainable parameters would not train";
  return row;
}

}  // namespace tp::cli::verify
