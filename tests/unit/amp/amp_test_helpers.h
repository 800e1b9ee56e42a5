// Helpers shared by the GradScaler tests: a tiny MLP held as plain tensors, and gradient clipping
// written with the same ATen ops as Python's clip_grad_norm_(foreach=True), so the oracle can
// compare bit for bit.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace tp::test {

/// Linear(8,16) -> ReLU -> Linear(16,4) as [W1, b1, W2, b2] (leaf tensors requiring grad).
inline at::Tensor mlp_forward(const std::vector<at::Tensor>& p, const at::Tensor& x) {
  return at::linear(at::relu(at::linear(x, p[0], p[1])), p[2], p[3]);
}

/// torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True) for one device and dtype.
/// Returns the total norm before clipping.
inline at::Tensor clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  const std::vector<at::Tensor> norms = at::_foreach_norm(grads, 2.0);
  const at::Tensor total = at::linalg_vector_norm(at::stack(norms), 2.0);
  // Python writes max_norm / (total + 1e-6), which Tensor.__rtruediv__ computes as reciprocal * max_norm.
  const at::Tensor coef = at::clamp((total + 1e-6).reciprocal() * max_norm, std::optional<at::Scalar>(), at::Scalar(1.0));
  at::_foreach_mul_(grads, coef);
  return total;
}

}  // namespace tp::test
