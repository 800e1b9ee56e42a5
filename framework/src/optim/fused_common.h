// What the fused SGD (fused_optimizers.cpp) and the fused Adam/AdamW (fused_adam.cpp) share:
// bucketing by device and dtype, the layout fix-up of restored state, the closure contract and the
// guard against optimizer state made under a CUDA graph capture. Private to the optimizer factory.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <optional>
#include <tuple>

namespace tp::detail {

/// The fused kernels take lists of one device and dtype (CUDA launches one multi-tensor kernel
/// per list), so a group's tensors are bucketed like Python's _group_tensors_by_device_and_dtype.
using BucketKey = std::tuple<int, int, int>; // device type, device index, dtype

inline BucketKey bucket_key(const at::Tensor& t) {
  return {static_cast<int>(t.device().type()), t.device().index(), static_cast<int>(t.scalar_type())};
}

/// `t` in `param`'s device, dtype and strides. The CPU kernels walk param, grad and state with one
/// linear index, so all must share the parameter's strides. Gradients follow the parameter's
/// layout (the autograd layout contract) and fresh state is zeros_like(param), so this copies only
/// state restored from a checkpoint for a parameter in another memory format (channels-last), and
/// only once: the caller stores it.
at::Tensor like_param(const at::Tensor& t, const at::Tensor& param);

/// `param`'s gradient as the kernels take it; throws for a sparse gradient, naming `optimizer`.
at::Tensor checked_grad(const at::Tensor& param, const char* optimizer);

/// Throws tp::Error when `forbidden` (DeviceStepOptimizer::forbid_new_state): state made under a
/// capture would be re-initialised by every replay.
void check_may_start_state(bool forbidden, const char* optimizer);

/// The torch::optim contract: a closure, when given, re-evaluates the loss with grad enabled.
torch::Tensor evaluate_closure(const torch::optim::Optimizer::LossClosure& closure);

inline std::optional<at::Tensor> optional_tensor(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

}  // namespace tp::detail
