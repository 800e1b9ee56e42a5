// torchhost C++ helpers for Tier T model authors: ResNet's stem max pool (kernel 3, stride 2,
// padding 1) through ops the host registers (torchhost::max_pool3x3s2_forward / backward,
// framework/src/ops/pool_ops.cpp), which save a one-byte window offset per output element where
// at::max_pool2d saves an int64 index, and gather in the backward. Looked up by name in c10's
// dispatcher as fused_norm.h's ops are; where they are missing (a CPU host, a host built without a
// CUDA compiler, an older host) at::max_pool2d runs instead.
//
//   return tp::cpp::max_pool_3x3_s2(tp::cpp::batch_norm_relu(bn1_, conv1_->forward(x), {}, fused_), fused_);
//
// Thread tag: any (the lookup is a function-local static; the ops run on the current CUDA stream).
#ifndef TP_CPP_FUSED_POOL_H
#define TP_CPP_FUSED_POOL_H

#ifndef TP_PLUGIN_TIER_T
#define TP_PLUGIN_TIER_T 1
#endif

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/max_pool2d.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "tp/cpp/fused_norm.h"  // detail::FusedOpPair, detail::find_fused_ops, detail::fusable_dtype

namespace tp::cpp {
namespace detail {

/// torchhost::max_pool3x3s2_forward / max_pool3x3s2_backward, typed as pool_ops.cpp registers them.
using FusedPoolOps =
    FusedOpPair<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&),
                at::Tensor(const at::Tensor&, const at::Tensor&, c10::ArrayRef<int64_t>)>;

/// The max pool ops, or nullptr; looked up once and apart from the normalisation ops, so a host
/// that has those but not these still fuses BatchNorm.
inline const FusedPoolOps* fused_pool_ops() {
  static const std::optional<FusedPoolOps> ops =
      find_fused_ops<FusedPoolOps>("torchhost::max_pool3x3s2_forward", "torchhost::max_pool3x3s2_backward");
  return ops ? &*ops : nullptr;
}

/// The autograd node of max_pool_3x3_s2's fused path: saves the forward's uint8 offsets and x's
/// sizes and dtype, not x or y. A gradient for x only. Not twice differentiable.
struct MaxPool3x3s2Function : torch::autograd::Function<MaxPool3x3s2Function> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [y, offsets] = fused_pool_ops()->forward.call(x);
    ctx->save_for_backward({offsets});
    ctx->saved_data["input_size"] = x.sizes().vec();
    ctx->saved_data["dtype"] = x.scalar_type();
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    // The backward op has no derivative of its own: under create_graph (a gradient penalty, double
    // backward) its result would be a leaf and the second derivative silently zero.
    TORCH_CHECK(!at::GradMode::is_enabled(),
                "tp::cpp::max_pool_3x3_s2's fused path is not twice differentiable; for a double backward "
                "(create_graph = true) build the model with its fused option off (the zoo's fused_norm = false) "
                "or pass allow_fused = false");
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const std::vector<int64_t> input_size = ctx->saved_data["input_size"].toIntVector();
    // The next layer's backward may hand any layout (or a broadcast); the op reads rows of channels.
    const at::Tensor dy = grad_outputs[0]
                              .to(ctx->saved_data["dtype"].toScalarType())
                              .contiguous(at::MemoryFormat::ChannelsLast);
    return {fused_pool_ops()->backward.call(dy, saved[0], input_size)};
  }
};

/// What the fused path needs of x (see max_pool_3x3_s2's contract).
inline bool fusable_pool_input(const at::Tensor& x) {
  return x.defined() && x.is_cuda() && x.dim() == 4 && fusable_dtype(x) &&
         x.is_contiguous(at::MemoryFormat::ChannelsLast) && x.size(2) >= 1 && x.size(3) >= 1;
}

}  // namespace detail

/// max_pool2d(x, kernel 3, stride 2, padding 1): what `at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1})`
/// computes (dilation 1, floor mode), ResNet's stem pool. Never modifies `x`.
///
/// Fused (the host's torchhost::max_pool3x3s2_forward / backward: one pass each way, saving one
/// byte per output element, the maximum's position in its window, instead of an int64 index)
/// only when all hold: `allow_fused`; x is a 4-d CUDA float32, bfloat16 or float16 tensor
/// contiguous in channels-last memory (H and W of at least 1); and the host registered both ops.
/// In or out of grad mode alike. Otherwise it runs exactly `at::max_pool2d(x, {3, 3}, {2, 2},
/// {1, 1})`, so its result is bit for bit that call's.
///
/// Fused results equal at::max_pool2d's on CUDA bit for bit, in every dtype: y is the window's
/// maximum by PyTorch's rule (the first of equal maxima; NaN propagates, the last NaN in the
/// window wins), the element's own bits; x's gradient is, per element, the same sum as PyTorch's
/// NHWC backward kernel computes: the gradients of the outputs that chose it, in the same order
/// (outputs ascending, row-major), accumulated in float and rounded once to x's dtype (and copied,
/// not summed, where a single output covers the element, as that kernel does). One exception: a
/// window whose elements are all -inf gives y = -inf either way, but PyTorch's NHWC kernel records
/// index 0 (the image's first element, outside most windows) where this records the window's first
/// element, so that gradient lands elsewhere. y is channels-last (as at::max_pool2d's for
/// channels-last x); the gradient is channels-last and in x's dtype. Deterministic (no atomics),
/// captured in CUDA graphs like any op (no host synchronisation), and not twice differentiable: a
/// double backward through the fused path fails with a message; allow_fused = false runs
/// at::max_pool2d, which is.
///
/// Example:
///   at::Tensor h = tp::cpp::max_pool_3x3_s2(stem_out, fused_);  // [N, C, 112, 112] -> [N, C, 56, 56]
inline at::Tensor max_pool_3x3_s2(const at::Tensor& x, bool allow_fused = true) {
  if (allow_fused && detail::fusable_pool_input(x) && detail::fused_pool_ops() != nullptr)
    return detail::MaxPool3x3s2Function::apply(x);
  return at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
}

}  // namespace tp::cpp

#endif  // TP_CPP_FUSED_POOL_H
