// Three op pairs over one set of kernels (norm_act_kernels.h), for CUDA tensors in channels-last
// memory:
//   torchhost::bn_act_forward / bn_act_backward: BatchNorm in training (batch statistics) fused with
//     ReLU, optionally with a residual added before the ReLU; the backward reads the forward's
//     output for the mask (ResNet's BN + identity + ReLU);
//   torchhost::bn_activation_forward / bn_activation_backward: BatchNorm in training fused with ReLU,
//     SiLU, Hardswish or nothing, no residual; the backward recomputes the activation's input from
//     x and the saved statistics, so it reads two tensors (dy, x) instead of three;
//   torchhost::bn_forward / bn_backward: BatchNorm in training alone (ResNet's downsample branch).
// Registered with c10's dispatcher for the CUDA key only; the SDK (tp/cpp/fused_norm.h) wraps them
// in autograd functions and keeps the unfused ops everywhere else. Every buffer comes from
// LibTorch's caching allocator and every launch goes to the current stream, with no host
// synchronisation, so all six ops can be captured in a CUDA graph.
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "ops/norm_act_kernels.h"
#include "tp/framework/ops/fused_ops.h"

namespace tp::ops {
namespace {

/// x's element type, or a c10::Error naming the supported ones.
ElementType element_type_of(const at::Tensor& x, const char* op) {
  switch (x.scalar_type()) {
    case at::kFloat: return ElementType::kFloat;
    case at::kBFloat16: return ElementType::kBFloat16;
    case at::kHalf: return ElementType::kHalf;
    default: TORCH_CHECK(false, op, ": x must be float32, bfloat16 or float16, got ", x.scalar_type());
  }
  return ElementType::kFloat;  // not reached
}

/// x itself: a 4-d CUDA tensor in channels-last memory with more than one value per channel.
void check_input(const at::Tensor& x, const char* op) {
  TORCH_CHECK(x.defined() && x.is_cuda(), op, ": x must be a CUDA tensor, got ",
              x.defined() ? x.device().str() : "an undefined tensor");
  TORCH_CHECK(x.dim() == 4, op, ": x must be 4-d [N, C, H, W], got ", x.sizes());
  TORCH_CHECK(x.is_contiguous(at::MemoryFormat::ChannelsLast), op,
              ": x must be contiguous in channels-last memory (x.contiguous(at::MemoryFormat::ChannelsLast)), got strides ",
              x.strides());
  TORCH_CHECK(x.size(1) >= 1 && x.numel() / x.size(1) > 1, op,
              ": expected more than 1 value per channel when training, got input size ", x.sizes());
}

/// A tensor read or written like x: same device, sizes, dtype and channels-last memory.
void check_like_input(const at::Tensor& t, const at::Tensor& x, const char* op, const char* name) {
  TORCH_CHECK(t.defined() && t.device() == x.device(), op, ": ", name, " must be on ", x.device());
  TORCH_CHECK(t.sizes() == x.sizes(), op, ": ", name, " must have x's sizes ", x.sizes(), ", got ", t.sizes());
  TORCH_CHECK(t.scalar_type() == x.scalar_type(), op, ": ", name, " must have x's dtype ", x.scalar_type(),
              ", got ", t.scalar_type());
  TORCH_CHECK(t.is_contiguous(at::MemoryFormat::ChannelsLast), op, ": ", name,
              " must be contiguous in channels-last memory, got strides ", t.strides());
}

/// A per-channel parameter or statistic: contiguous float32 [C] on x's device.
void check_channel_vector(const at::Tensor& t, const at::Tensor& x, const char* op, const char* name) {
  TORCH_CHECK(t.defined() && t.device() == x.device() && t.scalar_type() == at::kFloat && t.dim() == 1 &&
                  t.size(0) == x.size(1) && t.is_contiguous(),
              op, ": ", name, " must be a contiguous float32 [", x.size(1), "] tensor on ", x.device(), ", got ",
              t.defined() ? t.toString() + " " + c10::str(t.sizes()) + " on " + t.device().str() : "an undefined tensor");
}

/// The passes' plan for x, reading as wide as x's channels and every tensor in `rows` allow
/// (null entries skipped).
template <size_t N>
ReductionPlan plan_for(const at::Tensor& x, ElementType type, const void* const (&rows)[N]) {
  const int64_t channels = x.size(1);
  const int width = pick_vector_width(type, channels, rows, static_cast<int>(N));
  return plan_reduction(x.numel() / channels, channels, width,
                        at::cuda::getDeviceProperties(x.device().index())->multiProcessorCount);
}

/// The `activation` argument of the bn_activation ops (the values of Activation, norm_act_math.h).
Activation activation_of(int64_t code, const char* op) {
  TORCH_CHECK(code == static_cast<int64_t>(Activation::kRelu) || code == static_cast<int64_t>(Activation::kNone) ||
                  code == static_cast<int64_t>(Activation::kSilu) ||
                  code == static_cast<int64_t>(Activation::kHardswish),
              op, ": activation must be 0 (ReLU), 1 (none), 2 (SiLU) or 3 (Hardswish), got ", code);
  return static_cast<Activation>(code);
}

/// The forward of every op pair: act(bn(x) [+ residual]); `residual` is undefined for none.
std::tuple<at::Tensor, at::Tensor, at::Tensor> forward(const char* kOp, Activation activation, const at::Tensor& x,
                                                       const at::Tensor& residual, const at::Tensor& weight,
                                                       const at::Tensor& bias, const at::Tensor& running_mean,
                                                       const at::Tensor& running_var, double momentum, double eps) {
  check_input(x, kOp);
  const ElementType type = element_type_of(x, kOp);
  const bool has_residual = residual.defined();
  if (has_residual) check_like_input(residual, x, kOp, "residual");
  check_channel_vector(weight, x, kOp, "weight");
  check_channel_vector(bias, x, kOp, "bias");
  check_channel_vector(running_mean, x, kOp, "running_mean");
  check_channel_vector(running_var, x, kOp, "running_var");
  const c10::cuda::CUDAGuard device_guard(x.device());
  at::Tensor y = at::empty_like(x);  // x's strides (dense): the same row-of-channels order
  const void* const rows[] = {x.const_data_ptr(), has_residual ? residual.const_data_ptr() : nullptr, y.const_data_ptr()};
  const ReductionPlan plan = plan_for(x, type, rows);
  const at::TensorOptions f32 = x.options().dtype(at::kFloat);
  at::Tensor save_mean = at::empty({plan.channels}, f32);
  at::Tensor save_invstd = at::empty({plan.channels}, f32);
  at::Tensor workspace = at::empty({forward_workspace_floats(plan)}, f32);
  ForwardArgs args;
  args.type = type;
  args.activation = activation;
  args.x = x.const_data_ptr();
  args.residual = has_residual ? residual.const_data_ptr() : nullptr;
  args.y = y.mutable_data_ptr();
  args.weight = weight.const_data_ptr<float>();
  args.bias = bias.const_data_ptr<float>();
  args.running_mean = running_mean.mutable_data_ptr<float>();
  args.running_var = running_var.mutable_data_ptr<float>();
  args.save_mean = save_mean.mutable_data_ptr<float>();
  args.save_invstd = save_invstd.mutable_data_ptr<float>();
  args.workspace = workspace.mutable_data_ptr<float>();
  args.momentum = momentum;
  args.eps = eps;
  const cudaError_t error = launch_bn_act_forward(plan, args, at::cuda::getCurrentCUDAStream(x.device().index()));
  TORCH_CHECK(error == cudaSuccess, kOp, ": kernel launch failed: ", cudaGetErrorString(error));
  return {y, save_mean, save_invstd};
}

/// The backward of every op pair. With `bias` defined the activation's input is recomputed from x
/// (no residual then) and `y` is not read; otherwise `y` (the forward's output) gives ReLU's mask,
/// undefined for none.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> backward(
    const char* kOp, Activation activation, const at::Tensor& dy, const at::Tensor& x, const at::Tensor& y,
    const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& save_mean, const at::Tensor& save_invstd,
    bool has_residual) {
  check_input(x, kOp);
  const ElementType type = element_type_of(x, kOp);
  check_like_input(dy, x, kOp, "dy");
  const bool from_x = bias.defined();
  if (from_x) check_channel_vector(bias, x, kOp, "bias");
  if (activation == Activation::kRelu && !from_x) check_like_input(y, x, kOp, "y");
  check_channel_vector(weight, x, kOp, "weight");
  check_channel_vector(save_mean, x, kOp, "save_mean");
  check_channel_vector(save_invstd, x, kOp, "save_invstd");
  const c10::cuda::CUDAGuard device_guard(x.device());
  at::Tensor dx = at::empty_like(x);
  at::Tensor d_residual = has_residual ? at::empty_like(x) : at::Tensor();
  const void* const rows[] = {dy.const_data_ptr(), x.const_data_ptr(),
                              activation == Activation::kRelu && !from_x ? y.const_data_ptr() : nullptr,
                              dx.const_data_ptr(), has_residual ? d_residual.const_data_ptr() : nullptr};
  const ReductionPlan plan = plan_for(x, type, rows);
  const at::TensorOptions f32 = x.options().dtype(at::kFloat);
  at::Tensor grad_weight = at::empty({plan.channels}, f32);
  at::Tensor grad_bias = at::empty({plan.channels}, f32);
  at::Tensor workspace = at::empty({backward_workspace_floats(plan)}, f32);
  BackwardArgs args;
  args.type = type;
  args.activation = activation;
  args.dy = dy.const_data_ptr();
  args.x = x.const_data_ptr();
  args.y = activation == Activation::kRelu && !from_x ? y.const_data_ptr() : nullptr;
  args.weight = weight.const_data_ptr<float>();
  args.bias = from_x ? bias.const_data_ptr<float>() : nullptr;
  args.save_mean = save_mean.const_data_ptr<float>();
  args.save_invstd = save_invstd.const_data_ptr<float>();
  args.dx = dx.mutable_data_ptr();
  args.d_residual = has_residual ? d_residual.mutable_data_ptr() : nullptr;
  args.grad_weight = grad_weight.mutable_data_ptr<float>();
  args.grad_bias = grad_bias.mutable_data_ptr<float>();
  args.workspace = workspace.mutable_data_ptr<float>();
  const cudaError_t error = launch_bn_act_backward(plan, args, at::cuda::getCurrentCUDAStream(x.device().index()));
  TORCH_CHECK(error == cudaSuccess, kOp, ": kernel launch failed: ", cudaGetErrorString(error));
  return {dx, d_residual, grad_weight, grad_bias};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> bn_act_forward(const at::Tensor& x, const std::optional<at::Tensor>& residual,
                                                              const at::Tensor& weight, const at::Tensor& bias,
                                                              const at::Tensor& running_mean, const at::Tensor& running_var,
                                                              double momentum, double eps) {
  return forward("torchhost::bn_act_forward", Activation::kRelu, x, residual.value_or(at::Tensor()), weight, bias,
                 running_mean, running_var, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> bn_act_backward(
    const at::Tensor& dy, const at::Tensor& x, const at::Tensor& y, const at::Tensor& weight,
    const at::Tensor& save_mean, const at::Tensor& save_invstd, bool has_residual) {
  return backward("torchhost::bn_act_backward", Activation::kRelu, dy, x, y, weight, at::Tensor(), save_mean,
                  save_invstd, has_residual);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> bn_activation_forward(const at::Tensor& x, const at::Tensor& weight,
                                                                     const at::Tensor& bias,
                                                                     const at::Tensor& running_mean,
                                                                     const at::Tensor& running_var, double momentum,
                                                                     double eps, int64_t activation) {
  constexpr const char* kOp = "torchhost::bn_activation_forward";
  return forward(kOp, activation_of(activation, kOp), x, at::Tensor(), weight, bias, running_mean, running_var,
                 momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> bn_activation_backward(const at::Tensor& dy, const at::Tensor& x,
                                                                      const at::Tensor& weight, const at::Tensor& bias,
                                                                      const at::Tensor& save_mean,
                                                                      const at::Tensor& save_invstd,
                                                                      int64_t activation) {
  constexpr const char* kOp = "torchhost::bn_activation_backward";
  TORCH_CHECK(bias.defined(), kOp, ": bias must be the forward's BatchNorm bias, got an undefined tensor");
  auto [dx, d_residual, grad_weight, grad_bias] = backward(kOp, activation_of(activation, kOp), dy, x, at::Tensor(),
                                                           weight, bias, save_mean, save_invstd, /*has_residual=*/false);
  return {dx, grad_weight, grad_bias};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> bn_forward(const at::Tensor& x, const at::Tensor& weight,
                                                          const at::Tensor& bias, const at::Tensor& running_mean,
                                                          const at::Tensor& running_var, double momentum, double eps) {
  return forward("torchhost::bn_forward", Activation::kNone, x, at::Tensor(), weight, bias, running_mean, running_var,
                 momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> bn_backward(const at::Tensor& dy, const at::Tensor& x,
                                                           const at::Tensor& weight, const at::Tensor& save_mean,
                                                           const at::Tensor& save_invstd) {
  auto [dx, d_residual, grad_weight, grad_bias] =
      backward("torchhost::bn_backward", Activation::kNone, dy, x, at::Tensor(), weight, at::Tensor(), save_mean,
               save_invstd, /*has_residual=*/false);
  return {dx, grad_weight, grad_bias};
}

}  // namespace

void link_pool_ops();  // pool_ops.cpp: the max pool ops' registrations, kept by the reference

void link_fused_ops() { link_pool_ops(); }

}  // namespace tp::ops

// The schemas are the SDK's contract (tp/cpp/fused_norm.h looks them up by name and calls them
// with these exact C++ types): change them only together with it, under a new name. The SDK looks
// up each pair on its own, so a plugin built against a newer SDK still fuses what an older host
// offers: on a host without bn_activation_*, batch_norm_relu without a residual takes bn_act_*,
// and batch_norm_act with SiLU or Hardswish runs the module path.
TORCH_LIBRARY_FRAGMENT(torchhost, m) {
  m.def("bn_act_forward(Tensor x, Tensor? residual, Tensor weight, Tensor bias, Tensor(a!) running_mean, "
        "Tensor(b!) running_var, float momentum, float eps) -> (Tensor y, Tensor save_mean, Tensor save_invstd)");
  m.def("bn_act_backward(Tensor dy, Tensor x, Tensor y, Tensor weight, Tensor save_mean, Tensor save_invstd, "
        "bool has_residual) -> (Tensor dx, Tensor d_residual, Tensor grad_weight, Tensor grad_bias)");
  // activation: 0 ReLU, 1 none, 2 SiLU, 3 Hardswish (Activation, norm_act_math.h).
  m.def("bn_activation_forward(Tensor x, Tensor weight, Tensor bias, Tensor(a!) running_mean, Tensor(b!) running_var, "
        "float momentum, float eps, int activation) -> (Tensor y, Tensor save_mean, Tensor save_invstd)");
  m.def("bn_activation_backward(Tensor dy, Tensor x, Tensor weight, Tensor bias, Tensor save_mean, "
        "Tensor save_invstd, int activation) -> (Tensor dx, Tensor grad_weight, Tensor grad_bias)");
  m.def("bn_forward(Tensor x, Tensor weight, Tensor bias, Tensor(a!) running_mean, Tensor(b!) running_var, "
        "float momentum, float eps) -> (Tensor y, Tensor save_mean, Tensor save_invstd)");
  m.def("bn_backward(Tensor dy, Tensor x, Tensor weight, Tensor save_mean, Tensor save_invstd) "
        "-> (Tensor dx, Tensor grad_weight, Tensor grad_bias)");
}

TORCH_LIBRARY_IMPL(torchhost, CUDA, m) {
  m.impl("bn_act_forward", TORCH_FN(tp::ops::bn_act_forward));
  m.impl("bn_act_backward", TORCH_FN(tp::ops::bn_act_backward));
  m.impl("bn_activation_forward", TORCH_FN(tp::ops::bn_activation_forward));
  m.impl("bn_activation_backward", TORCH_FN(tp::ops::bn_activation_backward));
  m.impl("bn_forward", TORCH_FN(tp::ops::bn_forward));
  m.impl("bn_backward", TORCH_FN(tp::ops::bn_backward));
}
