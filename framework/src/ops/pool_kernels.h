// The CUDA kernels of the fused max pool (kernel 3, stride 2, padding 1, dilation 1, floor mode:
// ResNet's stem), registered by pool_ops.cpp as torchhost::max_pool3x3s2_forward / backward. The
// forward saves, per output element, the window position of its maximum as one byte
// (pool_passes.h) instead of PyTorch's int64 index; the backward gathers, one thread per input
// pack, from the outputs whose window covers it, so it needs no atomics and no zeroing pass.
// Plain CUDA, as norm_act_kernels.h: the caller allocates every buffer (from LibTorch's caching
// allocator) and names the stream, so the launches can be captured in a CUDA graph.
//
// Layout: x and dx are [N, C, H, W], y, dy and the offsets [N, C, OH, OW], all in channels-last
// memory (rows of C contiguous channels), OH and OW from max_pool3x3s2_output_size.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/norm_act_kernels.h"  // ElementType, pick_vector_width

namespace tp::ops {

/// The pool's sizes and how wide its passes read.
struct MaxPoolPlan {
  int64_t batch = 0;     ///< N >= 1
  int64_t channels = 0;  ///< C >= 1
  int64_t height = 0;    ///< H >= 1 (the input's)
  int64_t width = 0;     ///< W >= 1
  /// Elements per access in both passes: 1, 2, 4 or 8 (8 for 2-byte types only); divides channels,
  /// and every pointer of the pass is aligned to it (pick_vector_width, then the offsets' byte
  /// alignment).
  int vector_width = 1;
  int multiprocessors = 1;  ///< the device's, for the number of threads
};

/// Enqueues the forward on `stream`: y (x's type) and offsets (uint8, y's layout). Returns the
/// launch error (cudaErrorInvalidValue for a plan the kernels are not built for).
cudaError_t launch_max_pool3x3s2_forward(const MaxPoolPlan& plan, ElementType type, const void* x, void* y,
                                         uint8_t* offsets, cudaStream_t stream);

/// Enqueues the backward on `stream`: dx (dy's type, x's shape), every element written. Returns
/// the launch error.
cudaError_t launch_max_pool3x3s2_backward(const MaxPoolPlan& plan, ElementType type, const void* dy,
                                          const uint8_t* offsets, void* dx, cudaStream_t stream);

}  // namespace tp::ops
