// The CUDA kernels of the fused BatchNorm (training) + [residual add +] activation ops
// (norm_act_ops.cpp registers them as torchhost::bn_act_forward/bn_act_backward: ReLU with or
// without a residual, the backward reading the forward's output for the mask;
// torchhost::bn_activation_forward/bn_activation_backward: no residual, ReLU, none, SiLU or
// Hardswish, the backward recomputing the activation's input from x; torchhost::bn_forward/
// bn_backward: none): one set of kernels, templated on the activation.
// Plain CUDA: no LibTorch in the nvcc translation unit, so it compiles in seconds; the caller
// allocates every buffer (from LibTorch's caching allocator) and names the stream, so the launches
// can be captured in a CUDA graph.
//
// Layout: x is [N, C, H, W] in channels-last memory, read as M = N*H*W rows of C contiguous
// channels (element (m, c) at x[m * C + c]). Statistics and per-channel coefficients are fp32.
//
// Determinism: no atomics. Each reduction writes one partial per (row block, channel), and a
// finalize kernel combines a channel's partials in row-block order, so a run's results depend on
// the shapes and the device's multiprocessor count only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/norm_act_math.h"  // Activation

namespace tp::ops {

/// The element type of x, y, residual, dy, dx (statistics and parameters are always fp32).
enum class ElementType : int32_t { kFloat = 0, kBFloat16 = 1, kHalf = 2 };

/// How the M rows are split among reduction blocks: `row_blocks` blocks of `rows_per_block`
/// consecutive rows (the last may hold fewer, none is empty); and how wide every pass reads.
/// Chosen by plan_reduction.
struct ReductionPlan {
  int64_t rows = 0;            ///< M
  int64_t channels = 0;        ///< C
  int64_t rows_per_block = 0;  ///< >= 1
  int32_t row_blocks = 0;      ///< ceil(rows / rows_per_block), >= 1, <= 65535
  int vector_width = 1;        ///< elements per access in every pass: 1, 2, 4 or 8 (pick_vector_width)
  int multiprocessors = 1;     ///< the device's, for the elementwise passes' number of threads
};

/// Plans the passes over an [rows, channels] tensor read `vector_width` elements at a time (which
/// divides channels; pick_vector_width) on a device with `multiprocessors` SMs: enough reduction
/// blocks to fill it several times over, and not fewer than ~64 rows per block. The elementwise
/// passes plan from it too (norm_act_passes.h's plan_apply). Requires rows >= 1 and channels >= 1.
ReductionPlan plan_reduction(int64_t rows, int64_t channels, int vector_width, int multiprocessors);

/// The fp32 workspace the forward needs, in floats: partial means and M2s [2, row_blocks, C],
/// then scale and shift [2, C].
int64_t forward_workspace_floats(const ReductionPlan& plan);

/// Forward inputs and outputs; every pointer is device memory, the fp32 ones [C].
struct ForwardArgs {
  ElementType type = ElementType::kFloat;
  Activation activation = Activation::kRelu;
  const void* x = nullptr;
  const void* residual = nullptr;  ///< nullptr: no residual; else x's shape, type and layout
  void* y = nullptr;               ///< act(x * scale + shift [+ residual]), x's shape and type
  const float* weight = nullptr;
  const float* bias = nullptr;
  float* running_mean = nullptr;  ///< updated in place
  float* running_var = nullptr;   ///< updated in place (unbiased batch variance)
  float* save_mean = nullptr;     ///< written: the batch mean
  float* save_invstd = nullptr;   ///< written: 1 / sqrt(biased batch variance + eps)
  float* workspace = nullptr;     ///< forward_workspace_floats(plan) floats
  double momentum = 0.1;
  double eps = 1e-5;
};

/// Enqueues the forward (statistics, finalize, elementwise) on `stream`. Requires plan.rows >= 2.
/// Returns the first launch error (cudaSuccess when all three are enqueued).
cudaError_t launch_bn_act_forward(const ReductionPlan& plan, const ForwardArgs& args, cudaStream_t stream);

/// The fp32 workspace the backward needs, in floats: partial sums [2, row_blocks, C], then the
/// three dx coefficients [3, C], then the forward's scale and shift [2, C] (written when the
/// backward recomputes the activation's input).
int64_t backward_workspace_floats(const ReductionPlan& plan);

/// Backward inputs and outputs; every pointer is device memory, the fp32 ones [C].
struct BackwardArgs {
  ElementType type = ElementType::kFloat;
  Activation activation = Activation::kRelu;  ///< the forward's
  const void* dy = nullptr;  ///< y's shape, type and layout
  const void* x = nullptr;
  /// The forward's output, read for ReLU's mask (the gradient passes where y > 0) when `bias` is
  /// nullptr; unread otherwise (may be nullptr).
  const void* y = nullptr;
  const float* weight = nullptr;
  /// Non-null: the activation's input v = x * scale + shift is recomputed from x, with scale and
  /// shift from weight, bias and the saved statistics exactly as the forward computed them
  /// (affine_coefficients), and y is not read. Required for kSilu and kHardswish; excludes
  /// d_residual (the forward's residual is not at hand).
  const float* bias = nullptr;
  const float* save_mean = nullptr;
  const float* save_invstd = nullptr;
  void* dx = nullptr;
  void* d_residual = nullptr;  ///< nullptr: none; else written with g (dy * (y > 0), or dy for kNone)
  float* grad_weight = nullptr;
  float* grad_bias = nullptr;
  float* workspace = nullptr;  ///< backward_workspace_floats(plan) floats
};

/// Enqueues the backward (reduction, finalize, elementwise) on `stream`. Returns the first launch error.
cudaError_t launch_bn_act_backward(const ReductionPlan& plan, const BackwardArgs& args, cudaStream_t stream);

/// The widest load (in elements, at most 16 bytes) that divides `channels` and keeps every row
/// of every pointer in `pointers` aligned: 8/4/2/1 for 2-byte types, 4/2/1 for float. A null
/// pointer is skipped.
int pick_vector_width(ElementType type, int64_t channels, const void* const* pointers, int count);

}  // namespace tp::ops
