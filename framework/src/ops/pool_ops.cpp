// torchhost::max_pool3x3s2_forward / max_pool3x3s2_backward: max_pool2d with kernel 3, stride 2,
// padding 1 (ResNet's stem) over CUDA tensors in channels-last memory, saving a one-byte window
// offset per output element where PyTorch saves an int64 index (pool_kernels.h). Registered with
// c10's dispatcher for the CUDA key only; the SDK (tp/cpp/fused_pool.h) wraps them in an autograd
// function and keeps at::max_pool2d everywhere else. Every buffer comes from LibTorch's caching
// allocator and every launch goes to the current stream, with no host synchronisation, so both
// ops can be captured in a CUDA graph.
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "ops/pool_kernels.h"
#include "ops/pool_passes.h"

namespace tp::ops {
namespace {

constexpr const char* kForward = "torchhost::max_pool3x3s2_forward";
constexpr const char* kBackward = "torchhost::max_pool3x3s2_backward";

/// A 4-d CUDA float32, bfloat16 or float16 tensor contiguous in channels-last memory with H and W
/// of at least 1, or a c10::Error that says which of these it is not.
ElementType check_pool_tensor(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(t.defined() && t.is_cuda(), op, ": ", name, " must be a CUDA tensor, got ",
              t.defined() ? t.device().str() : "an undefined tensor",
              "; tp::cpp::max_pool_3x3_s2 runs at::max_pool2d for tensors elsewhere");
  TORCH_CHECK(t.dim() == 4, op, ": ", name, " must be 4-d [N, C, H, W], got ", t.sizes());
  TORCH_CHECK(t.is_contiguous(at::MemoryFormat::ChannelsLast), op, ": ", name,
              " must be contiguous in channels-last memory (t.contiguous(at::MemoryFormat::ChannelsLast)), got "
              "sizes ",
              t.sizes(), " and strides ", t.strides());
  TORCH_CHECK(t.size(2) >= 1 && t.size(3) >= 1, op, ": ", name,
              " must have H and W of at least 1 (a 3x3 window with padding 1 needs one input row and column), got ",
              t.sizes());
  switch (t.scalar_type()) {
    case at::kFloat: return ElementType::kFloat;
    case at::kBFloat16: return ElementType::kBFloat16;
    case at::kHalf: return ElementType::kHalf;
    default:
      TORCH_CHECK(false, op, ": ", name, " must be float32, bfloat16 or float16, got ", t.scalar_type());
  }
  return ElementType::kFloat;  // not reached
}

/// The widest access every tensor of a pass allows: pick_vector_width over the element tensors,
/// then halved until the offsets' address is aligned to it (V bytes a pack).
int pass_vector_width(ElementType type, int64_t channels, const void* a, const void* b, const void* offsets) {
  const void* const rows[] = {a, b};
  int width = pick_vector_width(type, channels, rows, 2);
  while (width > 1 && reinterpret_cast<uintptr_t>(offsets) % static_cast<uintptr_t>(width) != 0) width /= 2;
  return width;
}

MaxPoolPlan plan_for(const at::Tensor& input_like, int64_t height, int64_t width) {
  MaxPoolPlan plan;
  plan.batch = input_like.size(0);
  plan.channels = input_like.size(1);
  plan.height = height;
  plan.width = width;
  plan.multiprocessors = at::cuda::getDeviceProperties(input_like.device().index())->multiProcessorCount;
  return plan;
}

std::tuple<at::Tensor, at::Tensor> max_pool3x3s2_forward(const at::Tensor& x) {
  const ElementType type = check_pool_tensor(x, kForward, "x");
  const c10::cuda::CUDAGuard device_guard(x.device());
  const int64_t out_h = max_pool3x3s2_output_size(x.size(2));
  const int64_t out_w = max_pool3x3s2_output_size(x.size(3));
  const std::vector<int64_t> out_sizes = {x.size(0), x.size(1), out_h, out_w};
  at::Tensor y = at::empty(out_sizes, x.options().memory_format(at::MemoryFormat::ChannelsLast));
  at::Tensor offsets =
      at::empty(out_sizes, x.options().dtype(at::kByte).memory_format(at::MemoryFormat::ChannelsLast));
  if (y.numel() == 0) return {y, offsets};  // N or C is 0: nothing to launch
  MaxPoolPlan plan = plan_for(x, x.size(2), x.size(3));
  plan.vector_width = pass_vector_width(type, plan.channels, x.const_data_ptr(), y.const_data_ptr(),
                                        offsets.const_data_ptr());
  const cudaError_t error =
      launch_max_pool3x3s2_forward(plan, type, x.const_data_ptr(), y.mutable_data_ptr(),
                                   offsets.mutable_data_ptr<uint8_t>(), at::cuda::getCurrentCUDAStream(x.device().index()));
  TORCH_CHECK(error == cudaSuccess, kForward, ": kernel launch failed: ", cudaGetErrorString(error));
  return {y, offsets};
}

at::Tensor max_pool3x3s2_backward(const at::Tensor& dy, const at::Tensor& offsets, at::IntArrayRef input_size) {
  const ElementType type = check_pool_tensor(dy, kBackward, "dy");
  TORCH_CHECK(input_size.size() == 4 && input_size[0] == dy.size(0) && input_size[1] == dy.size(1) &&
                  input_size[2] >= 1 && input_size[3] >= 1 &&
                  max_pool3x3s2_output_size(input_size[2]) == dy.size(2) &&
                  max_pool3x3s2_output_size(input_size[3]) == dy.size(3),
              kBackward, ": input_size must be the forward's x sizes [N, C, H, W], whose pooled sizes "
              "[N, C, (H - 1) / 2 + 1, (W - 1) / 2 + 1] are dy's ", dy.sizes(), ", got ", input_size);
  TORCH_CHECK(offsets.defined() && offsets.device() == dy.device() && offsets.scalar_type() == at::kByte &&
                  offsets.sizes() == dy.sizes() && offsets.is_contiguous(at::MemoryFormat::ChannelsLast),
              kBackward, ": offsets must be the forward's uint8 offsets: dy's sizes ", dy.sizes(), " on ",
              dy.device(), ", contiguous in channels-last memory; got ",
              offsets.defined() ? offsets.toString() + " " + c10::str(offsets.sizes()) + " on " + offsets.device().str()
                                : std::string("an undefined tensor"));
  const c10::cuda::CUDAGuard device_guard(dy.device());
  at::Tensor dx = at::empty(input_size, dy.options().memory_format(at::MemoryFormat::ChannelsLast));
  if (dx.numel() == 0) return dx;
  MaxPoolPlan plan = plan_for(dy, input_size[2], input_size[3]);
  plan.vector_width = pass_vector_width(type, plan.channels, dy.const_data_ptr(), dx.const_data_ptr(),
                                        offsets.const_data_ptr());
  const cudaError_t error =
      launch_max_pool3x3s2_backward(plan, type, dy.const_data_ptr(), offsets.const_data_ptr<uint8_t>(),
                                    dx.mutable_data_ptr(), at::cuda::getCurrentCUDAStream(dy.device().index()));
  TORCH_CHECK(error == cudaSuccess, kBackward, ": kernel launch failed: ", cudaGetErrorString(error));
  return dx;
}

}  // namespace

// Called by link_fused_ops (norm_act_ops.cpp), so that the static library keeps this object file
// and its registrations.
void link_pool_ops() {}

}  // namespace tp::ops

// The schemas are the SDK's contract (tp/cpp/fused_pool.h looks them up by name and calls them with
// these exact C++ types): change them only together with it, under a new name. The backward takes
// the forward's input sizes (the output's do not determine H and W: 2k and 2k - 1 pool alike) and
// no input: it needs neither x nor y, only which window position each output took.
TORCH_LIBRARY_FRAGMENT(torchhost, m) {
  m.def("max_pool3x3s2_forward(Tensor x) -> (Tensor y, Tensor offsets)");
  m.def("max_pool3x3s2_backward(Tensor dy, Tensor offsets, int[] input_size) -> Tensor dx");
}

TORCH_LIBRARY_IMPL(torchhost, CUDA, m) {
  m.impl("max_pool3x3s2_forward", TORCH_FN(tp::ops::max_pool3x3s2_forward));
  m.impl("max_pool3x3s2_backward", TORCH_FN(tp::ops::max_pool3x3s2_backward));
}
