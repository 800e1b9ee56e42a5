// ResNet's stem max pool (kernel 3, stride 2, padding 1) through the fused kernels
// (framework/src/ops/pool_*, torchhost::max_pool3x3s2_forward / backward) by the SDK's
// tp::cpp::max_pool_3x3_s2, against at::max_pool2d on CUDA (channels-last input, so PyTorch's NHWC
// kernels): per dtype and shape, y and x's gradient compared as bits (NaN payloads included).
// Bounds: y equal bit for bit in every dtype, the gradient in float32; the 16-bit gradients within a
// unit in the last place (bit_differences says why), their differing count printed. y is an input element either way (the same element:
// same tie and NaN rule, tests/unit/ops/pool_passes_test.cpp); the gradient is the same float sum
// of the same terms in the same order as PyTorch's NHWC backward (outputs ascending), rounded once
// to the dtype, and copied where a single output covers the element, as that kernel does. Inputs
// hold ties (a few small integers, +-0.0) and NaNs, but no -inf: a window of -inf alone is the one
// documented difference (fused_pool.h). Also: a storage offset (narrower accesses), grad mode off,
// determinism, the cases that must stay at::max_pool2d, a double backward refused, and a CUDA-graph
// replay equal to the eager step.
#include <ATen/ATen.h>
#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2  // a CPU build compiles gpu_tests too
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tp/cpp/fused_pool.h"
#include "tp/framework/ops/fused_ops.h"

#include "gpu/gpu_helpers.h"

#include <doctest/doctest.h>

// Named, not anonymous: TP_UNITY may batch this file with the other gpu tests.
namespace pool_gpu_test {

void require_pool_ops() {
  REQUIRE_MESSAGE(at::hasCUDA(), tp::gpu_test::kNeedsCuda);
  tp::ops::link_fused_ops();
  REQUIRE_MESSAGE(tp::cpp::detail::fused_pool_ops() != nullptr,
                  "torchhost::max_pool3x3s2_forward/backward are not registered: built without TP_FUSED_OPS?");
}

bool is_pool_node(const std::string& name) { return name.find("MaxPool3x3s2Function") != std::string::npos; }

/// t's elements as integers of their width, so that at::equal compares bits (NaN equal to itself).
at::Tensor bits(const at::Tensor& t) {
  return t.contiguous().view(t.element_size() == 4 ? at::kInt : at::kShort);
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() && at::equal(bits(a), bits(b));
}

/// How many elements of a and b differ in their bits, and whether every one of those is within a
/// unit in the last place of b's dtype (NaN where b has NaN). The 16-bit gradients' bound: the sum
/// is the same float sum rounded once if PyTorch's NHWC backward accumulates as its source reads;
/// should it round after each add, sums of two or more terms may differ by that unit, a fact to
/// report (the printed count) rather than a fault of these kernels.
std::pair<int64_t, bool> bit_differences(const at::Tensor& a, const at::Tensor& b) {
  const int64_t differing = (bits(a) != bits(b)).sum().item<int64_t>();
  const at::Tensor fa = a.to(at::kFloat), fb = b.to(at::kFloat);
  const double eps = b.scalar_type() == at::kBFloat16 ? 1.0 / 128 : (b.scalar_type() == at::kHalf ? 1.0 / 1024 : 0.0);
  const bool nan_agree = at::equal(fa.isnan(), fb.isnan());
  const at::Tensor finite = fb.isfinite();
  const at::Tensor excess = ((fa - fb).abs() - eps * fb.abs()).masked_select(finite);
  return {differing, nan_agree && (excess.numel() == 0 || excess.max().item<double>() <= 0.0)};
}

/// [N, C, H, W] channels-last on CUDA: integers in [-2, 2] (ties), 15% -0.0 (ties whose bits tell
/// which was taken), 4% NaN.
at::Tensor tied_input(at::IntArrayRef shape, at::ScalarType dtype) {
  const at::TensorOptions cpu = at::TensorOptions().dtype(at::kFloat);
  at::Tensor x = at::randint(-2, 3, shape, cpu);
  const at::Tensor pick = at::rand(shape, cpu);
  x = at::where(pick > 0.81, at::full({}, -0.0, cpu), x);
  x = at::where(pick > 0.96, at::full({}, std::numeric_limits<float>::quiet_NaN(), cpu), x);
  return x.to(at::kCUDA).to(dtype).contiguous(at::MemoryFormat::ChannelsLast);
}

struct Step {
  at::Tensor y, dx;
  std::string node;
};

/// y = pool(x) and x's gradient for dy: through max_pool_3x3_s2 or at::max_pool2d.
Step step(const at::Tensor& x0, const at::Tensor& dy, bool fused, bool allow_fused = true) {
  const at::Tensor x = x0.detach().requires_grad_(true);
  const at::Tensor y = fused ? tp::cpp::max_pool_3x3_s2(x, allow_fused) : at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
  Step out;
  out.node = y.grad_fn() ? y.grad_fn()->name() : "";
  y.backward(dy);
  out.y = y.detach();
  out.dx = x.grad();
  return out;
}

}  // namespace pool_gpu_test

using pool_gpu_test::bits;
using pool_gpu_test::is_pool_node;
using pool_gpu_test::require_pool_ops;
using pool_gpu_test::bit_differences;
using pool_gpu_test::same_bits;
using pool_gpu_test::step;
using pool_gpu_test::tied_input;

TEST_CASE("fused max pool 3x3/2: y and x's gradient equal at::max_pool2d's bit for bit per dtype, ties and NaN included") {
  require_pool_ops();
  const std::vector<std::vector<int64_t>> shapes = {{2, 64, 7, 9}, {4, 64, 8, 6},   {3, 24, 1, 5},     {2, 24, 4, 2},
                                                    {2, 3, 5, 5},  {2, 40, 13, 11}, {1, 64, 1, 1},     {2, 3, 1, 2},
                                                    {8, 64, 112, 112}};
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (const auto& shape : shapes) {
      const at::IntArrayRef dims(shape);
      CAPTURE(dtype);
      CAPTURE(dims);
      at::manual_seed(41);
      for (const bool tied : {true, false}) {
        CAPTURE(tied);
        const at::Tensor x = tied ? tied_input(dims, dtype)
                                  : at::randn(dims, at::TensorOptions().device(at::kCUDA))
                                        .to(dtype)
                                        .contiguous(at::MemoryFormat::ChannelsLast);
        const std::vector<int64_t> out = {shape[0], shape[1], (shape[2] - 1) / 2 + 1, (shape[3] - 1) / 2 + 1};
        const at::Tensor dy = at::randn(out, at::TensorOptions().device(at::kCUDA)).to(dtype);
        const pool_gpu_test::Step fused = step(x, dy, true);
        const pool_gpu_test::Step reference = step(x, dy, false);
        CHECK(is_pool_node(fused.node));
        CHECK(same_bits(fused.y, reference.y));
        if (dtype == at::kFloat) {
          CHECK(same_bits(fused.dx, reference.dx));
        } else {
          const auto [differing, within_a_unit] = bit_differences(fused.dx, reference.dx);
          if (differing > 0) MESSAGE("gpu figure: fused max pool gradient: " << differing << " elements a unit apart");
          CHECK(within_a_unit);
        }
        CHECK(fused.y.is_contiguous(at::MemoryFormat::ChannelsLast));
        CHECK(fused.dx.is_contiguous(at::MemoryFormat::ChannelsLast));
        if (tied && x.numel() > 1000) CHECK(at::isnan(fused.y).any().item<bool>());
      }
    }
  }
}

TEST_CASE("fused max pool: a storage offset, an NCHW dy and grad mode off are read right; two runs give the same bits") {
  require_pool_ops();
  at::manual_seed(43);
  // x one element into its storage: no longer 16-byte aligned, so the passes read narrower.
  const at::Tensor storage = at::randn({1 + 2 * 9 * 7 * 64}, at::TensorOptions().device(at::kCUDA)).to(at::kHalf);
  const at::Tensor shifted = storage.narrow(0, 1, int64_t{2} * 9 * 7 * 64).view({2, 9, 7, 64}).permute({0, 3, 1, 2});
  REQUIRE(shifted.is_contiguous(at::MemoryFormat::ChannelsLast));
  REQUIRE(reinterpret_cast<std::uintptr_t>(shifted.const_data_ptr()) % 16 != 0);
  const at::Tensor dy = at::randn({2, 64, 5, 4}, at::TensorOptions().device(at::kCUDA)).to(at::kHalf);  // NCHW
  const pool_gpu_test::Step fused = step(shifted, dy, true);
  const pool_gpu_test::Step reference = step(shifted, dy, false);
  CHECK(is_pool_node(fused.node));
  CHECK(same_bits(fused.y, reference.y));
  CHECK(same_bits(fused.dx, reference.dx));

  const at::Tensor x = tied_input({16, 64, 56, 56}, at::kBFloat16);
  const at::Tensor big_dy = at::randn({16, 64, 28, 28}, at::TensorOptions().device(at::kCUDA)).to(at::kBFloat16);
  const pool_gpu_test::Step a = step(x, big_dy, true);
  const pool_gpu_test::Step b = step(x, big_dy, true);
  CHECK(same_bits(a.y, b.y));
  CHECK(same_bits(a.dx, b.dx));
  {
    const at::NoGradGuard no_grad;
    const at::Tensor y = tp::cpp::max_pool_3x3_s2(x);
    CHECK(y.grad_fn() == nullptr);
    CHECK(same_bits(y, at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1})));
  }
}

TEST_CASE("max_pool_3x3_s2 runs at::max_pool2d, bit for bit, with allow_fused = false, on the CPU and on NCHW input") {
  require_pool_ops();
  at::manual_seed(47);
  const at::Tensor x = tied_input({2, 32, 9, 9}, at::kFloat);
  const at::Tensor dy = at::randn({2, 32, 5, 5}, at::TensorOptions().device(at::kCUDA));
  const auto module_path = [](const at::Tensor& in, const at::Tensor& grad, bool allow_fused) {
    const pool_gpu_test::Step sdk = step(in, grad, true, allow_fused);
    const pool_gpu_test::Step reference = step(in, grad, false);
    CHECK(!is_pool_node(sdk.node));
    CHECK(sdk.node == reference.node);
    CHECK(same_bits(sdk.y, reference.y));
    CHECK(same_bits(sdk.dx, reference.dx));
  };
  module_path(x, dy, false);
  module_path(x.contiguous(), dy, true);                  // NCHW
  module_path(x.cpu(), dy.cpu(), true);                   // CPU, channels-last
  module_path(x.to(at::kDouble), dy.to(at::kDouble), true);  // float64: not a fused dtype
}

TEST_CASE("max_pool_3x3_s2's fused path refuses a double backward with a message") {
  require_pool_ops();
  at::manual_seed(53);
  const at::Tensor x = at::randn({2, 16, 8, 8}, at::TensorOptions().device(at::kCUDA))
                           .contiguous(at::MemoryFormat::ChannelsLast)
                           .requires_grad_();
  const at::Tensor y = tp::cpp::max_pool_3x3_s2(x);
  REQUIRE(is_pool_node(y.grad_fn()->name()));
  const at::Tensor loss = (y * y).sum();
  try {
    torch::autograd::grad({loss}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true);
    FAIL("a double backward through max_pool_3x3_s2's fused path was not refused");
  } catch (const c10::Error& e) {
    CHECK(std::string(e.what()).find("tp::cpp::max_pool_3x3_s2's fused path is not twice differentiable") !=
          std::string::npos);
  }
  CHECK(torch::autograd::grad({loss}, {x})[0].defined());
}

TEST_CASE("fused max pool is captured in a CUDA graph: one replay gives the eager step") {
  require_pool_ops();
#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
  at::manual_seed(59);
  const at::Tensor x = tied_input({16, 64, 56, 56}, at::kBFloat16);
  const at::Tensor dy = at::randn({16, 64, 28, 28}, at::TensorOptions().device(at::kCUDA)).to(at::kBFloat16);
  // Two warm-up steps and the capture on a side stream, which capture requires (as
  // fused_norm_support.h's check_graph_replay_is_eager and the framework's step_graph.cpp do).
  const at::Tensor graphed_x = x.clone().requires_grad_(true);
  at::cuda::CUDAGraph graph;
  at::Tensor y_graphed;
  {
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
    c10::cuda::device_synchronize();
    const c10::cuda::CUDAStreamGuard on_side(side);
    for (int i = 0; i < 2; ++i) tp::cpp::max_pool_3x3_s2(x.clone().requires_grad_(true)).backward(dy);
    c10::cuda::device_synchronize();
    graph.capture_begin(/*pool=*/{0, 0}, cudaStreamCaptureModeThreadLocal);
    y_graphed = tp::cpp::max_pool_3x3_s2(graphed_x);
    y_graphed.backward(dy);
    graph.capture_end();
    graph.replay();
    c10::cuda::device_synchronize();
  }
  const pool_gpu_test::Step eager = step(x, dy, true);
  CHECK(is_pool_node(eager.node));
  CHECK(same_bits(y_graphed, eager.y));
  CHECK(same_bits(graphed_x.grad(), eager.dx));
#endif
}
