// Shared by the fused normalisation GPU tests (gpu_fused_norm_test.cpp: BatchNorm + [residual add
// +] ReLU; gpu_fused_batch_norm_test.cpp: BatchNorm alone): one training step of a BatchNorm
// through the SDK's fused path or the module path, what it leaves, and the bounds per dtype (the
// tolerances' reasoning is gpu_fused_norm_test.cpp's header).
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>

#include <memory>
#include <string>

#include "tp/cpp/fused_norm.h"
#include "tp/framework/ops/fused_ops.h"

#include "gpu/gpu_helpers.h"

#include <doctest/doctest.h>

namespace tp::gpu_test::fused_norm {

using tp::gpu_test::kNeedsCuda;

/// What one forward and backward leaves: the output, the gradients, BatchNorm's buffers after it.
struct Outcome {
  at::Tensor y, dx, d_residual, d_weight, d_bias, running_mean, running_var, batches;
  std::string grad_fn;
};

/// BatchNorm2d(C) on CUDA with parameters and running statistics away from their defaults.
inline torch::nn::BatchNorm2d make_norm(int64_t channels) {
  torch::nn::BatchNorm2d bn(channels);
  bn->to(at::kCUDA);
  torch::NoGradGuard no_grad;
  bn->weight.uniform_(0.5, 1.5);
  bn->bias.uniform_(-0.5, 0.5);
  bn->running_mean.uniform_(-1.0, 1.0);
  bn->running_var.uniform_(0.5, 2.0);
  return bn;
}

inline torch::nn::BatchNorm2d copy_of(const torch::nn::BatchNorm2d& bn) {
  return torch::nn::BatchNorm2d(std::dynamic_pointer_cast<torch::nn::BatchNorm2dImpl>(bn->clone()));
}

enum class Path { kFused, kModule };

/// One training step of relu(bn(x) [+ residual]) on a copy of `bn`: through batch_norm_relu, or
/// through the module ops with the ReLU replaced by `mask` when one is given.
inline Outcome run(const torch::nn::BatchNorm2d& original, const at::Tensor& x0, const at::Tensor& residual0,
            const at::Tensor& dy, Path path, const at::Tensor& mask = {}) {
  torch::nn::BatchNorm2d bn = copy_of(original);
  const at::Tensor x = x0.detach().clone().requires_grad_(true);
  const at::Tensor residual = residual0.defined() ? residual0.detach().clone().requires_grad_(true) : at::Tensor();
  at::Tensor y;
  if (path == Path::kFused) {
    y = tp::cpp::batch_norm_relu(bn, x, residual);
  } else {
    at::Tensor z = bn->forward(x);
    if (residual.defined()) z = z + residual;
    y = mask.defined() ? z * mask : z.relu();
  }
  Outcome out;
  out.grad_fn = y.grad_fn() ? y.grad_fn()->name() : "";
  y.backward(dy);
  out.y = y.detach();
  out.dx = x.grad();
  out.d_residual = residual.defined() ? residual.grad() : at::Tensor();
  out.d_weight = bn->weight.grad();
  out.d_bias = bn->bias.grad();
  out.running_mean = bn->running_mean.clone();
  out.running_var = bn->running_var.clone();
  out.batches = bn->num_batches_tracked.clone();
  return out;
}

inline double relative_l2(const at::Tensor& a, const at::Tensor& reference) {
  const double scale = reference.to(at::kDouble).norm().item<double>();
  const double diff = (a.to(at::kDouble) - reference.to(at::kDouble)).norm().item<double>();
  return scale > 0.0 ? diff / scale : diff;
}

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

/// [N, C, H, W] in channels-last memory, `dtype`, values `scale * N(0, 1) + shift`.
inline at::Tensor channels_last(at::IntArrayRef shape, at::ScalarType dtype, double scale, double shift) {
  return (at::randn(shape, at::TensorOptions().device(at::kCUDA)) * scale + shift)
      .to(dtype)
      .contiguous(at::MemoryFormat::ChannelsLast);
}

inline bool same_bits(const Outcome& a, const Outcome& b) {
  bool same = at::equal(a.y, b.y) && at::equal(a.dx, b.dx) && at::equal(a.d_weight, b.d_weight) &&
              at::equal(a.d_bias, b.d_bias) && at::equal(a.running_mean, b.running_mean) &&
              at::equal(a.running_var, b.running_var) && at::equal(a.batches, b.batches);
  if (a.d_residual.defined()) same = same && at::equal(a.d_residual, b.d_residual);
  return same;
}

struct Bounds {
  double y, grad, mask_flips;
};

inline Bounds bounds_for(at::ScalarType dtype) {
  if (dtype == at::kFloat) return {1e-5, 1e-5, 1e-5};
  if (dtype == at::kHalf) return {2e-3, 1e-4, 1e-3};
  return {2e-2, 2e-2, 5e-3};  // bfloat16
}

inline void require_ops() {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  tp::ops::link_fused_ops();
  REQUIRE_MESSAGE(tp::cpp::detail::fused_norm_ops() != nullptr,
                  "torchhost::bn_act_forward/backward are not registered: built without TP_FUSED_OPS?");
  REQUIRE_MESSAGE(tp::cpp::detail::fused_batch_norm_ops() != nullptr,
                  "torchhost::bn_forward/backward are not registered: built without TP_FUSED_OPS?");
}

/// One training step of bn(x) on a copy of `bn`: through tp::cpp::batch_norm or bn->forward.
inline Outcome run_plain_norm(const torch::nn::BatchNorm2d& original, const at::Tensor& x0, const at::Tensor& dy,
                              Path path) {
  torch::nn::BatchNorm2d bn = copy_of(original);
  const at::Tensor x = x0.detach().clone().requires_grad_(true);
  const at::Tensor y = path == Path::kFused ? tp::cpp::batch_norm(bn, x) : bn->forward(x);
  Outcome out;
  out.grad_fn = y.grad_fn() ? y.grad_fn()->name() : "";
  y.backward(dy);
  out.y = y.detach();
  out.dx = x.grad();
  out.d_weight = bn->weight.grad();
  out.d_bias = bn->bias.grad();
  out.running_mean = bn->running_mean.clone();
  out.running_var = bn->running_var.clone();
  out.batches = bn->num_batches_tracked.clone();
  return out;
}

/// Whether a grad_fn name is batch_norm's fused node (BatchNormReluFunction's name does not contain it).
inline bool is_plain_norm_node(const std::string& name) { return name.find("BatchNormFunction") != std::string::npos; }

}  // namespace tp::gpu_test::fused_norm
