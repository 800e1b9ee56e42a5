// The CUDA kernels of the fused BatchNorm (training) + [residual add +] ReLU ops and of BatchNorm
// (training) alone (norm_act_ops.cpp registers them as torchhost::bn_act_forward/bn_act_backward and
// torchhost::bn_forward/bn_backward): one set of kernels, templated on the activation.
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

namespace tp::ops {

/// The element type of x, y, residual, dy, dx (statistics and parameters are always fp32).
enum class ElementType : int32_t { kFloat = 0, kBFloat16 = 1, kHalf = 2 };

/// The activation after BatchNorm [+ residual]: ReLU, or none (y = x * scale + shift [+ residual];
/// the backward then takes g = dy and reads neither y nor a mask).
enum class Activation : int32_t { kRelu = 0, kNone = 1 };

/// How the M rows are split among reduction blocks: `row_blocks` blocks of `rows_per_block`
/// consecutive rows (the last may hold fewer, none is empty). Chosen by plan_reduction.
struct ReductionPlan {
  int64_t rows = 0;            ///< M
  int64_t channels = 0;        ///< C
  int64_t rows_per_block = 0;  ///< >= 1
  int32_t row_blocks = 0;      ///< ceil(rows / rows_per_block), >= 1, <= 65535
};

/// Plans the reduction of an [rows, channels] tensor on a device with `multiprocessors` SMs:
/// enough blocks to fill it several times over, and not fewer than ~64 rows per block.
/// Requires rows >= 1 and channels >= 1.
ReductionPlan plan_reduction(int64_t rows, int64_t channels, int multiprocessors);

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
  int vector_width = 1;  ///< elements per load in the elementwise pass: 1, 2, 4 or 8 (see pick_vector_width)
};

/// Enqueues the forward (statistics, finalize, elementwise) on `stream`. Requires plan.rows >= 2.
/// Returns the first launch error (cudaSuccess when all three are enqueued).
cudaError_t launch_bn_act_forward(const ReductionPlan& plan, const ForwardArgs& args, cudaStream_t stream);

/// The fp32 workspace the backward needs, in floats: partial sums [2, row_blocks, C], then the
/// three dx coefficients [3, C].
int64_t backward_workspace_floats(const ReductionPlan& plan);

/// Backward inputs and outputs; every pointer is device memory, the fp32 ones [C].
struct BackwardArgs {
  ElementType type = ElementType::kFloat;
  Activation activation = Activation::kRelu;  ///< the forward's
  const void* dy = nullptr;  ///< y's shape, type and layout
  const void* x = nullptr;
  const void* y = nullptr;  ///< the forward's output: the ReLU passed where y > 0; unread (may be nullptr) for kNone
  const float* weight = nullptr;
  const float* save_mean = nullptr;
  const float* save_invstd = nullptr;
  void* dx = nullptr;
  void* d_residual = nullptr;  ///< nullptr: none; else written with g (dy * (y > 0), or dy for kNone)
  float* grad_weight = nullptr;
  float* grad_bias = nullptr;
  float* workspace = nullptr;  ///< backward_workspace_floats(plan) floats
  int vector_width = 1;
};

/// Enqueues the backward (reduction, finalize, elementwise) on `stream`. Returns the first launch error.
cudaError_t launch_bn_act_backward(const ReductionPlan& plan, const BackwardArgs& args, cudaStream_t stream);

/// The widest load (in elements, at most 16 bytes) that divides `channels` and keeps every row
/// of every pointer in `pointers` aligned: 8/4/2/1 for 2-byte types, 4/2/1 for float. A null
/// pointer is skipped.
int pick_vector_width(ElementType type, int64_t channels, const void* const* pointers, int count);

}  // namespace tp::ops
