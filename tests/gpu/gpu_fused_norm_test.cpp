// The fused BatchNorm + [residual add +] ReLU ops (framework/src/ops, torchhost::bn_act_forward and
// bn_act_backward) through the SDK's tp::cpp::batch_norm_relu (plugin_api/include/tp/cpp/fused_norm.h)
// against the module path it replaces: forward, gradients, running statistics, determinism, the
// cases that must stay unfused, CUDA-graph capture, and ResNet-18 trained by the host with
// model.fused_norm on and off. The same for BatchNorm alone (torchhost::bn_forward / bn_backward
// through tp::cpp::batch_norm), and ResNet-18/50's downsample branches taking it.
//
// Tolerances (relative L2: |fused - reference| / |reference|), measured on an H200 at about a
// tenth of each bound. The fused path rounds once to x's dtype; the module path rounds after
// BatchNorm and again after the residual add, so where bn(x) + residual is within a rounding of zero
// the two ReLUs can disagree (about 1 element in 1,000 in bf16 with a residual) and there one
// path's gradient passes and the other's does not. So the reference for the gradients applies the
// fused output's ReLU mask (reference y = (bn(x) + residual) * (fused y > 0)), and the mask flips
// are bounded separately. Within that: float32 1e-5 (fp32 arithmetic on both sides), float16 1e-4
// on gradients and 2e-3 on y (11-bit mantissa), bfloat16 2e-2 (8-bit mantissa; the reference's own
// bf16 BatchNorm backward differs from an fp32 one by a few 1e-3). Running statistics within 1e-5
// (both accumulate in fp32 or better). BatchNorm alone has no mask: the same bounds, against the
// module path itself.
#include <ATen/ATen.h>
#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2  // a CPU build compiles gpu_tests too
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/nn/modules/batchnorm.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tp/cpp/fused_norm.h"
#include "tp/framework/config/validate.h"
#include "tp/framework/ops/fused_ops.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/model_proxy.h"
#include "tp/framework/plugin/plugin_library.h"
#include "tp/framework/util/log.h"

#include "gpu/gpu_helpers.h"

#include <doctest/doctest.h>

using tp::gpu_test::kNeedsCuda;

namespace {

/// What one forward and backward leaves: the output, the gradients, BatchNorm's buffers after it.
struct Outcome {
  at::Tensor y, dx, d_residual, d_weight, d_bias, running_mean, running_var, batches;
  std::string grad_fn;
};

/// BatchNorm2d(C) on CUDA with parameters and running statistics away from their defaults.
torch::nn::BatchNorm2d make_norm(int64_t channels) {
  torch::nn::BatchNorm2d bn(channels);
  bn->to(at::kCUDA);
  torch::NoGradGuard no_grad;
  bn->weight.uniform_(0.5, 1.5);
  bn->bias.uniform_(-0.5, 0.5);
  bn->running_mean.uniform_(-1.0, 1.0);
  bn->running_var.uniform_(0.5, 2.0);
  return bn;
}

torch::nn::BatchNorm2d copy_of(const torch::nn::BatchNorm2d& bn) {
  return torch::nn::BatchNorm2d(std::dynamic_pointer_cast<torch::nn::BatchNorm2dImpl>(bn->clone()));
}

enum class Path { kFused, kModule };

/// One training step of relu(bn(x) [+ residual]) on a copy of `bn`: through batch_norm_relu, or
/// through the module ops with the ReLU replaced by `mask` when one is given.
Outcome run(const torch::nn::BatchNorm2d& original, const at::Tensor& x0, const at::Tensor& residual0,
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

double relative_l2(const at::Tensor& a, const at::Tensor& reference) {
  const double scale = reference.to(at::kDouble).norm().item<double>();
  const double diff = (a.to(at::kDouble) - reference.to(at::kDouble)).norm().item<double>();
  return scale > 0.0 ? diff / scale : diff;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

/// [N, C, H, W] in channels-last memory, `dtype`, values `scale * N(0, 1) + shift`.
at::Tensor channels_last(at::IntArrayRef shape, at::ScalarType dtype, double scale, double shift) {
  return (at::randn(shape, at::TensorOptions().device(at::kCUDA)) * scale + shift)
      .to(dtype)
      .contiguous(at::MemoryFormat::ChannelsLast);
}

bool same_bits(const Outcome& a, const Outcome& b) {
  bool same = at::equal(a.y, b.y) && at::equal(a.dx, b.dx) && at::equal(a.d_weight, b.d_weight) &&
              at::equal(a.d_bias, b.d_bias) && at::equal(a.running_mean, b.running_mean) &&
              at::equal(a.running_var, b.running_var) && at::equal(a.batches, b.batches);
  if (a.d_residual.defined()) same = same && at::equal(a.d_residual, b.d_residual);
  return same;
}

struct Bounds {
  double y, grad, mask_flips;
};

Bounds bounds_for(at::ScalarType dtype) {
  if (dtype == at::kFloat) return {1e-5, 1e-5, 1e-5};
  if (dtype == at::kHalf) return {2e-3, 1e-4, 1e-3};
  return {2e-2, 2e-2, 5e-3};  // bfloat16
}

void require_ops() {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  tp::ops::link_fused_ops();
  REQUIRE_MESSAGE(tp::cpp::detail::fused_norm_ops() != nullptr,
                  "torchhost::bn_act_forward/backward are not registered: built without TP_FUSED_OPS?");
  REQUIRE_MESSAGE(tp::cpp::detail::fused_batch_norm_ops() != nullptr,
                  "torchhost::bn_forward/backward are not registered: built without TP_FUSED_OPS?");
}

/// One training step of bn(x) on a copy of `bn`: through tp::cpp::batch_norm or bn->forward.
Outcome run_plain_norm(const torch::nn::BatchNorm2d& original, const at::Tensor& x0, const at::Tensor& dy, Path path) {
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
bool is_plain_norm_node(const std::string& name) { return name.find("BatchNormFunction") != std::string::npos; }

}  // namespace

TEST_CASE("fused BatchNorm + ReLU: forward, gradients and running statistics match the module path per dtype") {
  require_ops();
  const std::vector<std::vector<int64_t>> shapes = {{2, 64, 5, 7}, {8, 256, 14, 14}, {32, 100, 9, 9}, {64, 64, 56, 56},
                                                    {4, 3, 17, 13}};
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const Bounds bound = bounds_for(dtype);
    for (const auto& shape : shapes) {
      for (const bool with_residual : {false, true}) {
        const at::IntArrayRef dims(shape);
        CAPTURE(dtype);
        CAPTURE(dims);
        CAPTURE(with_residual);
        at::manual_seed(11);
        const torch::nn::BatchNorm2d bn = make_norm(shape[1]);
        // A mean away from 0 exercises the statistics' shift; the residual and dy are centred.
        const at::Tensor x = channels_last(shape, dtype, 2.0, 3.0);
        const at::Tensor residual = with_residual ? channels_last(shape, dtype, 1.0, 0.0) : at::Tensor();
        const at::Tensor dy = channels_last(shape, dtype, 1.0, 0.0);

        const Outcome fused = run(bn, x, residual, dy, Path::kFused);
        CHECK(fused.grad_fn.find("BatchNormReluFunction") != std::string::npos);
        const at::Tensor mask = fused.y > 0;
        const Outcome plain = run(bn, x, residual, dy, Path::kModule);
        const double flips = (plain.y > 0).ne(mask).to(at::kDouble).mean().item<double>();
        const Outcome reference = run(bn, x, residual, dy, Path::kModule, mask);
        MESSAGE("y " << relative_l2(fused.y, reference.y) << ", dx " << relative_l2(fused.dx, reference.dx)
                     << ", dweight " << relative_l2(fused.d_weight, reference.d_weight) << ", dbias "
                     << relative_l2(fused.d_bias, reference.d_bias) << ", mask flips " << flips);
        CHECK(flips <= bound.mask_flips);
        CHECK(relative_l2(fused.y, reference.y) <= bound.y);
        CHECK(relative_l2(fused.dx, reference.dx) <= bound.grad);
        CHECK(relative_l2(fused.d_weight, reference.d_weight) <= bound.grad);
        CHECK(relative_l2(fused.d_bias, reference.d_bias) <= bound.grad);
        if (with_residual) {
          // The residual's gradient is dy where the fused output passed the ReLU, exactly.
          CHECK(at::equal(fused.d_residual, dy * mask.to(dtype)));
          CHECK(relative_l2(fused.d_residual, reference.d_residual) <= bound.grad);
        }
        CHECK(max_abs_diff(fused.running_mean, reference.running_mean) <= 1e-5);
        CHECK(max_abs_diff(fused.running_var, reference.running_var) <= 1e-5 * std::max(1.0, reference.running_var.abs().max().item<double>()));
        CHECK(at::equal(fused.batches, reference.batches));
        CHECK(fused.y.is_contiguous(at::MemoryFormat::ChannelsLast));
        CHECK(fused.dx.is_contiguous(at::MemoryFormat::ChannelsLast));
        CHECK((fused.dx.scalar_type() == dtype));
      }
    }
  }
}

TEST_CASE("fused BatchNorm + ReLU: two runs give the same bits; a storage offset and an NCHW dy are read right") {
  require_ops();
  at::manual_seed(3);
  const torch::nn::BatchNorm2d bn = make_norm(256);
  const at::Tensor x = channels_last({32, 256, 28, 28}, at::kBFloat16, 2.0, 1.0);
  const at::Tensor residual = channels_last({32, 256, 28, 28}, at::kBFloat16, 1.0, 0.0);
  const at::Tensor dy = channels_last({32, 256, 28, 28}, at::kBFloat16, 1.0, 0.0);
  CHECK(same_bits(run(bn, x, residual, dy, Path::kFused), run(bn, x, residual, dy, Path::kFused)));

  // x one element into its storage (the scalar, unaligned path) gives what an aligned copy gives;
  // a dy in NCHW memory is made channels-last by the SDK's backward.
  const at::Tensor storage = at::randn({1 + 2 * 5 * 7 * 64}, at::TensorOptions().device(at::kCUDA)).to(at::kHalf);
  const at::Tensor shifted = storage.narrow(0, 1, 2 * 5 * 7 * 64).view({2, 5, 7, 64}).permute({0, 3, 1, 2});
  REQUIRE(shifted.is_contiguous(at::MemoryFormat::ChannelsLast));
  const torch::nn::BatchNorm2d small = make_norm(64);
  const at::Tensor small_dy = at::randn({2, 64, 5, 7}, at::TensorOptions().device(at::kCUDA)).to(at::kHalf);
  const Outcome offset = run(small, shifted, {}, small_dy, Path::kFused);
  const Outcome aligned = run(small, shifted.clone(), {}, small_dy.contiguous(at::MemoryFormat::ChannelsLast), Path::kFused);
  CHECK(same_bits(offset, aligned));
}

TEST_CASE("batch_norm_relu keeps the module path, bit for bit, in eval, on NCHW input and with allow_fused = false") {
  require_ops();
  at::manual_seed(5);
  const torch::nn::BatchNorm2d bn = make_norm(64);
  const at::Tensor x = channels_last({4, 64, 9, 9}, at::kFloat, 1.0, 0.5);
  const at::Tensor residual = channels_last({4, 64, 9, 9}, at::kFloat, 1.0, 0.0);
  const at::Tensor dy = channels_last({4, 64, 9, 9}, at::kFloat, 1.0, 0.0);
  const auto module_path = [](torch::nn::BatchNorm2d& b, const at::Tensor& in, const at::Tensor& r) {
    at::Tensor out = b->forward(in);
    out += r;
    return out.relu_();
  };
  {  // eval: running statistics, the module's own kernels
    torch::nn::BatchNorm2d a = copy_of(bn), b = copy_of(bn);
    a->eval();
    b->eval();
    const at::Tensor fused = tp::cpp::batch_norm_relu(a, x, residual);
    CHECK(at::equal(fused, module_path(b, x, residual)));
  }
  {  // NCHW input in training
    const at::Tensor nchw = x.contiguous();
    const at::Tensor nchw_residual = residual.contiguous();
    torch::nn::BatchNorm2d a = copy_of(bn), b = copy_of(bn);
    const at::Tensor fused = tp::cpp::batch_norm_relu(a, nchw, nchw_residual);
    CHECK(at::equal(fused, module_path(b, nchw, nchw_residual)));
    CHECK(at::equal(a->running_mean, b->running_mean));
    CHECK(at::equal(a->num_batches_tracked, b->num_batches_tracked));
  }
  {  // allow_fused = false
    torch::nn::BatchNorm2d a = copy_of(bn), b = copy_of(bn);
    const at::Tensor fused = tp::cpp::batch_norm_relu(a, x, residual, /*allow_fused=*/false);
    CHECK(at::equal(fused, module_path(b, x, residual)));
    CHECK(at::equal(a->running_var, b->running_var));
  }
  {  // momentum = None (cumulative average)
    torch::nn::BatchNorm2d a(torch::nn::BatchNorm2dOptions(64).momentum(std::nullopt));
    a->to(at::kCUDA);
    torch::nn::BatchNorm2d b = copy_of(a);
    const Outcome none = run(a, x, residual, dy, Path::kFused);
    CHECK(none.grad_fn.find("BatchNormReluFunction") == std::string::npos);
    CHECK(at::equal(tp::cpp::batch_norm_relu(a, x, residual), module_path(b, x, residual)));
  }
}

TEST_CASE("the fused path refuses a double backward with a message, and an optional holding no tensor is no residual") {
  require_ops();
  at::manual_seed(9);
  torch::nn::BatchNorm2d bn = make_norm(32);
  const at::Tensor x = channels_last({4, 32, 6, 6}, at::kFloat, 1.0, 0.5).requires_grad_();
  const at::Tensor y = tp::cpp::batch_norm_relu(bn, x);
  REQUIRE(std::string(y.grad_fn()->name()).find("BatchNormReluFunction") != std::string::npos);
  // create_graph = true: the backward op has no derivative, so a second one would be silently zero.
  try {
    torch::autograd::grad({y.sum()}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true);
    FAIL("a double backward through the fused path was not refused");
  } catch (const c10::Error& e) {
    CHECK(std::string(e.what()).find("not twice differentiable") != std::string::npos);
  }
  // The same graph's first-order backward still runs.
  const auto grads = torch::autograd::grad({y.sum()}, {x});
  CHECK(grads[0].defined());

  // An optional holding an undefined tensor, handed to the autograd function directly, is read as
  // no residual: its gradient slot stays empty, and the values equal the residual-free call's.
  torch::nn::BatchNorm2d a = copy_of(bn), b = copy_of(bn);
  const at::Tensor plain = x.detach().clone().requires_grad_();
  const at::Tensor via_empty = tp::cpp::detail::BatchNormReluFunction::apply(
      plain, std::optional<at::Tensor>(at::Tensor()), a->weight, a->bias, a->running_mean, a->running_var,
      *a->options.momentum(), a->options.eps());
  via_empty.sum().backward();
  const at::Tensor reference = tp::cpp::batch_norm_relu(b, x.detach());
  CHECK(at::equal(via_empty.detach(), reference));
  CHECK(plain.grad().defined());
}

TEST_CASE("fused BatchNorm + ReLU is captured in a CUDA graph: one replay gives the eager step") {
  require_ops();
#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
  at::manual_seed(9);
  const torch::nn::BatchNorm2d bn = make_norm(128);
  const at::Tensor x = channels_last({16, 128, 14, 14}, at::kBFloat16, 2.0, 1.0);
  const at::Tensor residual = channels_last({16, 128, 14, 14}, at::kBFloat16, 1.0, 0.0);
  const at::Tensor dy = channels_last({16, 128, 14, 14}, at::kBFloat16, 1.0, 0.0);
  torch::nn::BatchNorm2d graphed = copy_of(bn);
  const at::Tensor x_graphed = x.clone().requires_grad_(true);
  const at::Tensor residual_graphed = residual.clone().requires_grad_(true);
  at::cuda::CUDAGraph graph;
  at::Tensor y_graphed;
  {
    // Warm-up and capture on a side stream (capture refuses the default stream), as the
    // framework's step_graph.cpp does.
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
    c10::cuda::device_synchronize();
    const c10::cuda::CUDAStreamGuard on_side(side);
    for (int i = 0; i < 2; ++i) {
      torch::nn::BatchNorm2d warm = copy_of(bn);
      tp::cpp::batch_norm_relu(warm, x.clone().requires_grad_(true), residual).backward(dy);
    }
    c10::cuda::device_synchronize();
    graph.capture_begin(/*pool=*/{0, 0}, cudaStreamCaptureModeThreadLocal);
    y_graphed = tp::cpp::batch_norm_relu(graphed, x_graphed, residual_graphed);
    y_graphed.backward(dy);
    graph.capture_end();
    graph.replay();
    c10::cuda::device_synchronize();
  }
  torch::nn::BatchNorm2d eager = copy_of(bn);
  const at::Tensor x_eager = x.clone().requires_grad_(true);
  const at::Tensor residual_eager = residual.clone().requires_grad_(true);
  const at::Tensor y_eager = tp::cpp::batch_norm_relu(eager, x_eager, residual_eager);
  y_eager.backward(dy);
  CHECK(at::equal(y_graphed, y_eager));
  CHECK(at::equal(x_graphed.grad(), x_eager.grad()));
  CHECK(at::equal(residual_graphed.grad(), residual_eager.grad()));
  CHECK(at::equal(graphed->weight.grad(), eager->weight.grad()));
  CHECK(at::equal(graphed->bias.grad(), eager->bias.grad()));
  // The capture itself ran nothing: one replay updated the statistics once, as one eager step.
  CHECK(at::equal(graphed->running_mean, eager->running_mean));
  CHECK(at::equal(graphed->running_var, eager->running_var));
  CHECK(at::equal(graphed->num_batches_tracked, eager->num_batches_tracked));
#endif
}

TEST_CASE("fused BatchNorm alone: forward, gradients and running statistics match the module path per dtype") {
  require_ops();
  const std::vector<std::vector<int64_t>> shapes = {{2, 64, 5, 7}, {8, 256, 14, 14}, {32, 100, 9, 9}, {64, 64, 56, 56},
                                                    {4, 3, 17, 13}, {16, 2048, 7, 7}};
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const Bounds bound = bounds_for(dtype);
    for (const auto& shape : shapes) {
      const at::IntArrayRef dims(shape);
      CAPTURE(dtype);
      CAPTURE(dims);
      at::manual_seed(13);
      const torch::nn::BatchNorm2d bn = make_norm(shape[1]);
      const at::Tensor x = channels_last(shape, dtype, 2.0, 3.0);
      const at::Tensor dy = channels_last(shape, dtype, 1.0, 0.0);
      const Outcome fused = run_plain_norm(bn, x, dy, Path::kFused);
      CHECK(is_plain_norm_node(fused.grad_fn));
      const Outcome reference = run_plain_norm(bn, x, dy, Path::kModule);
      MESSAGE("y " << relative_l2(fused.y, reference.y) << ", dx " << relative_l2(fused.dx, reference.dx)
                   << ", dweight " << relative_l2(fused.d_weight, reference.d_weight) << ", dbias "
                   << relative_l2(fused.d_bias, reference.d_bias));
      CHECK(relative_l2(fused.y, reference.y) <= bound.y);
      CHECK(relative_l2(fused.dx, reference.dx) <= bound.grad);
      CHECK(relative_l2(fused.d_weight, reference.d_weight) <= bound.grad);
      CHECK(relative_l2(fused.d_bias, reference.d_bias) <= bound.grad);
      CHECK((fused.y < 0).any().item<bool>());  // no ReLU: negative outputs pass unclipped
      CHECK(max_abs_diff(fused.running_mean, reference.running_mean) <= 1e-5);
      CHECK(max_abs_diff(fused.running_var, reference.running_var) <=
            1e-5 * std::max(1.0, reference.running_var.abs().max().item<double>()));
      CHECK(at::equal(fused.batches, reference.batches));
      CHECK(fused.y.is_contiguous(at::MemoryFormat::ChannelsLast));
      CHECK(fused.dx.is_contiguous(at::MemoryFormat::ChannelsLast));
      CHECK((fused.y.scalar_type() == dtype));
      CHECK((fused.dx.scalar_type() == dtype));
    }
  }
}

TEST_CASE("fused BatchNorm alone: two runs give the same bits; a storage offset and an NCHW dy are read right") {
  require_ops();
  at::manual_seed(17);
  const torch::nn::BatchNorm2d bn = make_norm(256);
  const at::Tensor x = channels_last({32, 256, 28, 28}, at::kBFloat16, 2.0, 1.0);
  const at::Tensor dy = channels_last({32, 256, 28, 28}, at::kBFloat16, 1.0, 0.0);
  CHECK(same_bits(run_plain_norm(bn, x, dy, Path::kFused), run_plain_norm(bn, x, dy, Path::kFused)));

  const at::Tensor storage = at::randn({1 + 2 * 5 * 7 * 64}, at::TensorOptions().device(at::kCUDA)).to(at::kHalf);
  const at::Tensor shifted = storage.narrow(0, 1, 2 * 5 * 7 * 64).view({2, 5, 7, 64}).permute({0, 3, 1, 2});
  REQUIRE(shifted.is_contiguous(at::MemoryFormat::ChannelsLast));
  const torch::nn::BatchNorm2d small = make_norm(64);
  const at::Tensor small_dy = at::randn({2, 64, 5, 7}, at::TensorOptions().device(at::kCUDA)).to(at::kHalf);
  const Outcome offset = run_plain_norm(small, shifted, small_dy, Path::kFused);
  const Outcome aligned =
      run_plain_norm(small, shifted.clone(), small_dy.contiguous(at::MemoryFormat::ChannelsLast), Path::kFused);
  CHECK(is_plain_norm_node(offset.grad_fn));
  CHECK(same_bits(offset, aligned));
}

TEST_CASE("batch_norm keeps the module path, bit for bit, in eval, on NCHW input, with allow_fused = false and momentum = None") {
  require_ops();
  at::manual_seed(19);
  const torch::nn::BatchNorm2d bn = make_norm(64);
  const at::Tensor x = channels_last({4, 64, 9, 9}, at::kFloat, 1.0, 0.5);
  const auto same_as_module = [](torch::nn::BatchNorm2d a, torch::nn::BatchNorm2d b, const at::Tensor& in,
                                 bool allow_fused) {
    const at::Tensor fused = tp::cpp::batch_norm(a, in, allow_fused);
    CHECK(!(fused.grad_fn() && is_plain_norm_node(fused.grad_fn()->name())));
    CHECK(at::equal(fused, b->forward(in)));
    CHECK(at::equal(a->running_mean, b->running_mean));
    CHECK(at::equal(a->running_var, b->running_var));
    CHECK(at::equal(a->num_batches_tracked, b->num_batches_tracked));
  };
  {  // eval
    torch::nn::BatchNorm2d a = copy_of(bn), b = copy_of(bn);
    a->eval();
    b->eval();
    same_as_module(a, b, x, true);
  }
  same_as_module(copy_of(bn), copy_of(bn), x.contiguous(), true);  // NCHW input in training
  same_as_module(copy_of(bn), copy_of(bn), x, false);
  {  // momentum = None (cumulative average)
    torch::nn::BatchNorm2d a(torch::nn::BatchNorm2dOptions(64).momentum(std::nullopt));
    a->to(at::kCUDA);
    same_as_module(a, copy_of(a), x, true);
  }
}

TEST_CASE("batch_norm's fused path refuses a double backward with a message") {
  require_ops();
  at::manual_seed(23);
  torch::nn::BatchNorm2d bn = make_norm(32);
  const at::Tensor x = channels_last({4, 32, 6, 6}, at::kFloat, 1.0, 0.5).requires_grad_();
  const at::Tensor y = tp::cpp::batch_norm(bn, x);
  REQUIRE(is_plain_norm_node(y.grad_fn()->name()));
  const at::Tensor loss = (y * y).sum();  // a non-constant dy, so a second derivative would not vanish
  try {
    torch::autograd::grad({loss}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true);
    FAIL("a double backward through batch_norm's fused path was not refused");
  } catch (const c10::Error& e) {
    CHECK(std::string(e.what()).find("tp::cpp::batch_norm's fused path is not twice differentiable") !=
          std::string::npos);
  }
  CHECK(torch::autograd::grad({loss}, {x})[0].defined());
}

TEST_CASE("fused BatchNorm alone is captured in a CUDA graph: one replay gives the eager step") {
  require_ops();
#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
  at::manual_seed(29);
  const torch::nn::BatchNorm2d bn = make_norm(128);
  const at::Tensor x = channels_last({16, 128, 14, 14}, at::kBFloat16, 2.0, 1.0);
  const at::Tensor dy = channels_last({16, 128, 14, 14}, at::kBFloat16, 1.0, 0.0);
  torch::nn::BatchNorm2d graphed = copy_of(bn);
  const at::Tensor x_graphed = x.clone().requires_grad_(true);
  at::cuda::CUDAGraph graph;
  at::Tensor y_graphed;
  {
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
    c10::cuda::device_synchronize();
    const c10::cuda::CUDAStreamGuard on_side(side);
    for (int i = 0; i < 2; ++i) {
      torch::nn::BatchNorm2d warm = copy_of(bn);
      tp::cpp::batch_norm(warm, x.clone().requires_grad_(true)).backward(dy);
    }
    c10::cuda::device_synchronize();
    graph.capture_begin(/*pool=*/{0, 0}, cudaStreamCaptureModeThreadLocal);
    y_graphed = tp::cpp::batch_norm(graphed, x_graphed);
    y_graphed.backward(dy);
    graph.capture_end();
    graph.replay();
    c10::cuda::device_synchronize();
  }
  torch::nn::BatchNorm2d eager = copy_of(bn);
  const at::Tensor x_eager = x.clone().requires_grad_(true);
  const at::Tensor y_eager = tp::cpp::batch_norm(eager, x_eager);
  y_eager.backward(dy);
  CHECK(at::equal(y_graphed, y_eager));
  CHECK(at::equal(x_graphed.grad(), x_eager.grad()));
  CHECK(at::equal(graphed->weight.grad(), eager->weight.grad()));
  CHECK(at::equal(graphed->bias.grad(), eager->bias.grad()));
  CHECK(at::equal(graphed->running_mean, eager->running_mean));
  CHECK(at::equal(graphed->running_var, eager->running_var));
  CHECK(at::equal(graphed->num_batches_tracked, eager->num_batches_tracked));
#endif
}

namespace {

struct NormTestHost {
  tp::Logger logger;
  tp::HostServices services{logger, tp::ProcessPlace{}};
};

/// org.torchhost.resnet of `depth` from the built resnet.so, in this process, on CUDA in training,
/// its 4-d state in channels-last memory as run.channels_last leaves it; seeded, so two calls with
/// the same depth build the same weights.
std::unique_ptr<tp::ModelProxy> cuda_resnet(int64_t depth, bool fused_norm) {
  static NormTestHost host;  // outlives the library
  static const std::shared_ptr<tp::PluginLibrary> library = tp::PluginLibrary::load(
      std::filesystem::path(tp::test::plugin_dir()) / "resnet.so", host.services);
  for (const tp::ComponentInfo& info : library->components()) {
    if (info.id != "org.torchhost.resnet") continue;
    toml::table options;
    options.insert("depth", depth);
    options.insert("num_classes", 10);
    options.insert("fused_norm", fused_norm);
    tp::ComponentConfig config{info.id, "model", std::move(options)};
    tp::validate_component(config, info.schema, "");
    at::manual_seed(31);
    auto model = std::make_unique<tp::ModelProxy>(tp::ComponentEntry{&info, library}, config);
    model->to_device(c10::Device(c10::kCUDA));
    for (const tp::StateTensor& s : model->state())
      if (s.tensor.dim() == 4) s.tensor.set_data(s.tensor.contiguous(at::MemoryFormat::ChannelsLast));
    model->set_training(true);
    return model;
  }
  FAIL("resnet.so has no org.torchhost.resnet");
  return nullptr;
}

/// How many autograd nodes behind `out` have each name, every node counted once.
std::map<std::string, int> node_names_behind(const at::Tensor& out) {
  std::map<std::string, int> names;
  std::set<const torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> pending = {out.grad_fn().get()};
  while (!pending.empty()) {
    torch::autograd::Node* node = pending.back();
    pending.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    ++names[node->name()];
    for (const torch::autograd::Edge& edge : node->next_edges()) pending.push_back(edge.function.get());
  }
  return names;
}

int count_where(const std::map<std::string, int>& names, bool (*matches)(const std::string&)) {
  int n = 0;
  for (const auto& [name, count] : names)
    if (matches(name)) n += count;
  return n;
}

bool is_relu_norm_node(const std::string& name) { return name.find("BatchNormReluFunction") != std::string::npos; }
bool is_module_norm_node(const std::string& name) { return name.find("BatchNormBackward") != std::string::npos; }

}  // namespace

TEST_CASE("ResNet-18 and ResNet-50 on CUDA, channels-last, training: every downsample BatchNorm takes the fused op") {
  require_ops();
  // ResNet-18: 3 downsample branches (layer2-4), 17 BatchNorm + ReLU (stem, 2 per block); ResNet-50:
  // 4 (layer1-4), 49 (stem, 3 per block). With fused_norm = false all of them are the module's.
  struct Expected {
    int64_t depth;
    int downsample, relu;
  };
  for (const Expected e : {Expected{18, 3, 17}, Expected{50, 4, 49}}) {
    CAPTURE(e.depth);
    const at::Tensor image = at::randn({4, 3, 64, 64}, at::TensorOptions().device(at::kCUDA))
                                 .contiguous(at::MemoryFormat::ChannelsLast);
    std::map<std::string, at::Tensor> logits;
    for (const bool fused : {true, false}) {
      CAPTURE(fused);
      auto model = cuda_resnet(e.depth, fused);
      const tp::NamedTensors outputs = model->forward({{"image", image}});
      const auto found = std::find_if(outputs.begin(), outputs.end(), [](const auto& o) { return o.first == "logits"; });
      REQUIRE(found != outputs.end());
      const at::Tensor out = found->second;
      const auto names = node_names_behind(out);
      CHECK(count_where(names, is_plain_norm_node) == (fused ? e.downsample : 0));
      CHECK(count_where(names, is_relu_norm_node) == (fused ? e.relu : 0));
      CHECK(count_where(names, is_module_norm_node) == (fused ? 0 : e.downsample + e.relu));
      out.to(at::kFloat).square().sum().backward();
      for (const tp::StateTensor& s : model->state()) {
        if (s.name == "layer2.0.downsample.1.num_batches_tracked") CHECK(s.tensor.item<int64_t>() == 1);
        if (s.name == "layer2.0.downsample.1.weight") {
          REQUIRE(s.tensor.grad().defined());
          CHECK(s.tensor.grad().isfinite().all().item<bool>());
        }
      }
      logits[fused ? "fused" : "module"] = out.detach();
    }
    // Same weights, same input: the paths differ by BatchNorm's rounding, carried through the net
    // (TF32 convolutions on both sides).
    const double diff = relative_l2(logits["fused"], logits["module"]);
    MESSAGE("ResNet-" << e.depth << " logits, fused against module path: " << diff);
    CHECK(diff <= 5e-3);
  }
}

namespace {

/// ResNet-18 on shapes 64x64 through the host: bf16, channels-last, 30 steps, every step's loss.
std::vector<double> resnet_losses(const std::string& extra, const std::string& name) {
  const auto dir = tp::test::fresh_dir(name);
  const auto run = tp::test::run_host(
      "--config configs/resnet18.toml --set run.device=\"cuda\" --set run.channels_last=true "
      "--set amp.precision=\"bf16\" --set progress.mode=\"off\" --set plots.enabled=false --set train.epochs=1 "
      "--set data.train.size=960 --set data.train.val_size=128 --set train.log_every_steps=1 "
      "--set eval.strategy=\"no\" --set checkpoint.monitor=\"train/loss\" --set checkpoint.mode=\"min\" " +
      extra + " --output-dir '" + dir.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  std::vector<double> losses;
  for (const auto& row : tp::gpu_test::step_rows(dir))
    if (row.has("train/loss")) losses.push_back(row.values.at("train/loss"));
  return losses;
}

double mean_of(const std::vector<double>& v, size_t from, size_t to) {
  double sum = 0.0;
  for (size_t i = from; i < to; ++i) sum += v[i];
  return sum / static_cast<double>(to - from);
}

}  // namespace

TEST_CASE("ResNet-18 on CUDA, bf16, channels-last: model.fused_norm = true trains as false does (eager, graphed, checkpointed)") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  // Not bit for bit: cuDNN's and max-pool's backward kernels are not deterministic run to run, and
  // the fused path rounds differently. Bounds: the first step (one forward from the same
  // initialisation) within 2%, the mean loss of the 30 steps within 10%, and both runs learn.
  const auto unfused = resnet_losses("--set model.fused_norm=false", "gpu_fused_norm_off");
  const auto fused = resnet_losses("--set model.fused_norm=true", "gpu_fused_norm_on");
  const auto graphed = resnet_losses("--set model.fused_norm=true --set run.cuda_graphs=\"on\"", "gpu_fused_norm_graphs");
  // Activation checkpointing recomputes each block (fused ops included) in backward, its BatchNorm
  // statistics restored after the recompute.
  const auto checkpointed =
      resnet_losses("--set model.fused_norm=true --set model.activation_checkpointing=true", "gpu_fused_norm_checkpointed");
  REQUIRE(unfused.size() == 30);
  REQUIRE(fused.size() == unfused.size());
  REQUIRE(graphed.size() == unfused.size());
  REQUIRE(checkpointed.size() == unfused.size());
  const size_t n = unfused.size();
  MESSAGE("first loss: unfused " << unfused[0] << ", fused " << fused[0] << ", graphed " << graphed[0]
                                 << "; mean: unfused " << mean_of(unfused, 0, n) << ", fused " << mean_of(fused, 0, n)
                                 << ", graphed " << mean_of(graphed, 0, n) << ", checkpointed "
                                 << mean_of(checkpointed, 0, n));
  for (const auto* run : {&fused, &graphed, &checkpointed}) {
    CHECK(std::abs((*run)[0] - unfused[0]) <= 0.02 * unfused[0]);
    CHECK(std::abs(mean_of(*run, 0, n) - mean_of(unfused, 0, n)) <= 0.10 * mean_of(unfused, 0, n));
    CHECK(mean_of(*run, n - 5, n) < (*run)[0]);
    for (const double loss : *run) CHECK(std::isfinite(loss));
  }
  CHECK(mean_of(unfused, n - 5, n) < unfused[0]);
}
