// Shared by the fused normalisation GPU tests (gpu_fused_norm_test.cpp: BatchNorm + [residual add
// +] ReLU; gpu_fused_batch_norm_test.cpp: BatchNorm alone; gpu_fused_activation_test.cpp:
// BatchNorm + ReLU, SiLU, Hardswish or none without a residual): one training step of a BatchNorm
// through the SDK's fused path or the module path, what it leaves, the autograd nodes' names, the
// bounds per dtype (the tolerances' reasoning is gpu_fused_norm_test.cpp's header), and the check
// that a CUDA-graph replay of a step is the eager step.
#pragma once

#include <ATen/ATen.h>
#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2  // a CPU build compiles gpu_tests too
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif
#include <torch/nn/modules/batchnorm.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

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

/// y.backward(dy) for a step that computed y from `x` (and `residual`, if defined) with `bn`, and
/// what it leaves.
inline Outcome finish_step(torch::nn::BatchNorm2d& bn, const at::Tensor& x, const at::Tensor& residual,
                           const at::Tensor& y, const at::Tensor& dy) {
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

/// One training step of relu(bn(x) [+ residual]) on a copy of `bn`: through batch_norm_relu, or
/// through the module ops with the ReLU replaced by `mask` when one is given.
inline Outcome run(const torch::nn::BatchNorm2d& original, const at::Tensor& x0, const at::Tensor& residual0,
                   const at::Tensor& dy, Path path, const at::Tensor& mask = {}) {
  torch::nn::BatchNorm2d bn = copy_of(original);
  const at::Tensor x = x0.detach().requires_grad_(true);
  const at::Tensor residual = residual0.defined() ? residual0.detach().requires_grad_(true) : at::Tensor();
  at::Tensor y;
  if (path == Path::kFused) {
    y = tp::cpp::batch_norm_relu(bn, x, residual);
  } else {
    at::Tensor z = bn->forward(x);
    if (residual.defined()) z = z + residual;
    y = mask.defined() ? z * mask : z.relu();
  }
  return finish_step(bn, x, residual, y, dy);
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
  REQUIRE_MESSAGE(tp::cpp::detail::fused_activation_ops() != nullptr,
                  "torchhost::bn_activation_forward/backward are not registered: built without TP_FUSED_OPS?");
}

/// One training step of bn(x) on a copy of `bn`: through tp::cpp::batch_norm or bn->forward.
inline Outcome run_plain_norm(const torch::nn::BatchNorm2d& original, const at::Tensor& x0, const at::Tensor& dy,
                              Path path) {
  torch::nn::BatchNorm2d bn = copy_of(original);
  const at::Tensor x = x0.detach().requires_grad_(true);
  const at::Tensor y = path == Path::kFused ? tp::cpp::batch_norm(bn, x) : bn->forward(x);
  return finish_step(bn, x, {}, y, dy);
}

/// act(z) as the module path applies it after bn->forward: at::relu, at::silu, at::hardswish or z.
/// With `piece` defined, ReLU and Hardswish take the piece the fused path took, so that gradients
/// compare without the elements a rounding puts on either side of a kink (gpu_fused_norm_test.cpp's
/// and gpu_fused_activation_test.cpp's headers): ReLU passes where piece > 0 (piece: the fused
/// output), Hardswish takes its piece by `piece` (the fused path's activation input, float32); the
/// values are still z's.
inline at::Tensor module_activation(const at::Tensor& z, tp::cpp::NormActivation activation,
                                    const at::Tensor& piece = {}) {
  switch (activation) {
    case tp::cpp::NormActivation::kRelu: return piece.defined() ? z * (piece > 0) : at::relu(z);
    case tp::cpp::NormActivation::kSilu: return at::silu(z);
    case tp::cpp::NormActivation::kHardswish:
      if (!piece.defined()) return at::hardswish(z);
      // at::hardswish's pieces: 0 up to -3, z (z + 3) / 6 below 3, z from 3 (its backward's branches).
      return at::where(piece <= -3.0, at::zeros_like(z), at::where(piece < 3.0, z * (z + 3.0) / 6.0, z));
    case tp::cpp::NormActivation::kNone: return z;
  }
  return z;
}

/// One training step of act(bn(x)) on a copy of `bn`: through the SDK (batch_norm_relu without a
/// residual for ReLU, batch_norm_act otherwise), or through bn->forward and module_activation.
inline Outcome run_activation(const torch::nn::BatchNorm2d& original, const at::Tensor& x0, const at::Tensor& dy,
                              tp::cpp::NormActivation activation, Path path, const at::Tensor& piece = {}) {
  torch::nn::BatchNorm2d bn = copy_of(original);
  const at::Tensor x = x0.detach().requires_grad_(true);
  at::Tensor y;
  if (path == Path::kModule)
    y = module_activation(bn->forward(x), activation, piece);
  else if (activation == tp::cpp::NormActivation::kRelu)
    y = tp::cpp::batch_norm_relu(bn, x);
  else
    y = tp::cpp::batch_norm_act(bn, x, activation);
  return finish_step(bn, x, {}, y, dy);
}

// The fused paths' autograd nodes by name (torch::autograd::CppNode<tp::cpp::detail::...>); no
// name contains another's.
/// batch_norm's node (torchhost::bn_forward / bn_backward).
inline bool is_plain_norm_node(const std::string& name) { return name.find("BatchNormFunction") != std::string::npos; }
/// batch_norm_relu's with a residual (torchhost::bn_act_forward / bn_act_backward).
inline bool is_relu_norm_node(const std::string& name) {
  return name.find("BatchNormReluFunction") != std::string::npos;
}
/// batch_norm_act's, and batch_norm_relu's without a residual (torchhost::bn_activation_*).
inline bool is_activation_norm_node(const std::string& name) {
  return name.find("BatchNormActivationFunction") != std::string::npos;
}

/// y of `bn` on `x` through an SDK function, fused where `allow_fused` and its conditions allow.
using SdkForward = std::function<at::Tensor(torch::nn::BatchNorm2d&, const at::Tensor&, bool allow_fused)>;
/// y of `bn` on `x` through the module ops the SDK function stands for.
using ModuleForward = std::function<at::Tensor(torch::nn::BatchNorm2d&, const at::Tensor&)>;

/// Checks that `sdk` keeps the module path, bit for bit, where the fused path must not run: in
/// eval, on NCHW input in training, with allow_fused = false, and with momentum = None (the
/// cumulative average): y equal to `module`'s on another copy of `bn`, no fused node of any kind,
/// the running statistics and num_batches_tracked equal. `x` is channels-last with bn's channels.
inline void check_module_path_kept(const torch::nn::BatchNorm2d& bn, const at::Tensor& x, const SdkForward& sdk,
                                   const ModuleForward& module) {
  const auto same_as_module = [&](torch::nn::BatchNorm2d fused_side, torch::nn::BatchNorm2d module_side,
                                  const at::Tensor& in, bool allow_fused) {
    const at::Tensor out = sdk(fused_side, in, allow_fused);
    const std::string node = out.grad_fn() ? out.grad_fn()->name() : "";
    CHECK(!is_activation_norm_node(node));
    CHECK(!is_relu_norm_node(node));
    CHECK(!is_plain_norm_node(node));
    CHECK(at::equal(out, module(module_side, in)));
    CHECK(at::equal(fused_side->running_mean, module_side->running_mean));
    CHECK(at::equal(fused_side->running_var, module_side->running_var));
    CHECK(at::equal(fused_side->num_batches_tracked, module_side->num_batches_tracked));
  };
  {  // eval: running statistics, the module's own kernels
    torch::nn::BatchNorm2d f = copy_of(bn), m = copy_of(bn);
    f->eval();
    m->eval();
    same_as_module(f, m, x, true);
  }
  same_as_module(copy_of(bn), copy_of(bn), x.contiguous(), true);  // NCHW input in training
  same_as_module(copy_of(bn), copy_of(bn), x, false);
  {  // momentum = None (cumulative average)
    torch::nn::BatchNorm2d f(torch::nn::BatchNorm2dOptions(x.size(1)).momentum(std::nullopt));
    f->to(at::kCUDA);
    same_as_module(f, copy_of(f), x, true);
  }
}

#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
/// y of one training step of `bn` on `inputs` (x first, then any other input, each a leaf that
/// requires grad).
using NormStep = std::function<at::Tensor(torch::nn::BatchNorm2d&, const std::vector<at::Tensor>&)>;

/// Captures `step` on a copy of `bn` in a CUDA graph (two warm-up steps and the capture on a side
/// stream, which capture requires, as the framework's step_graph.cpp does), replays it once, and
/// checks the replay left exactly what one eager step on another copy leaves: y, every input's
/// gradient, weight and bias gradients, the running statistics and num_batches_tracked (the capture
/// itself runs nothing, so one replay is one step). `node` holds for the eager step's grad_fn name.
inline void check_graph_replay_is_eager(const torch::nn::BatchNorm2d& bn, const std::vector<at::Tensor>& inputs,
                                        const at::Tensor& dy, const NormStep& step,
                                        const std::function<bool(const std::string&)>& node) {
  const auto leaves = [&] {
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : inputs) out.push_back(t.clone().requires_grad_(true));
    return out;
  };
  torch::nn::BatchNorm2d graphed = copy_of(bn);
  const std::vector<at::Tensor> graphed_inputs = leaves();
  at::cuda::CUDAGraph graph;
  at::Tensor y_graphed;
  {
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
    c10::cuda::device_synchronize();
    const c10::cuda::CUDAStreamGuard on_side(side);
    for (int i = 0; i < 2; ++i) {
      torch::nn::BatchNorm2d warm = copy_of(bn);
      step(warm, leaves()).backward(dy);
    }
    c10::cuda::device_synchronize();
    graph.capture_begin(/*pool=*/{0, 0}, cudaStreamCaptureModeThreadLocal);
    y_graphed = step(graphed, graphed_inputs);
    y_graphed.backward(dy);
    graph.capture_end();
    graph.replay();
    c10::cuda::device_synchronize();
  }
  torch::nn::BatchNorm2d eager = copy_of(bn);
  const std::vector<at::Tensor> eager_inputs = leaves();
  const at::Tensor y_eager = step(eager, eager_inputs);
  REQUIRE(y_eager.grad_fn() != nullptr);
  CHECK(node(y_eager.grad_fn()->name()));
  y_eager.backward(dy);
  CHECK(at::equal(y_graphed, y_eager));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    CAPTURE(i);
    CHECK(at::equal(graphed_inputs[i].grad(), eager_inputs[i].grad()));
  }
  CHECK(at::equal(graphed->weight.grad(), eager->weight.grad()));
  CHECK(at::equal(graphed->bias.grad(), eager->bias.grad()));
  CHECK(at::equal(graphed->running_mean, eager->running_mean));
  CHECK(at::equal(graphed->running_var, eager->running_var));
  CHECK(at::equal(graphed->num_batches_tracked, eager->num_batches_tracked));
}
#endif

}  // namespace tp::gpu_test::fused_norm
