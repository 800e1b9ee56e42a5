// The fused max pool kernels (pool_kernels.h): one launch each way, each thread on one pack of V
// channels that it keeps while it strides over rows (pool_passes.h holds the per-thread work, host
// and device code, checked on the CPU by tests/unit/ops/pool_passes_test.cpp).
// The forward reads each input pack up to 4 times (a window overlaps its neighbours'), from L2 at
// the stem's sizes; the backward reads dy and the offsets of up to 4 outputs per input pack. Each
// writes its output once: y + offsets (3 bytes an element in bfloat16 where PyTorch writes 10),
// then dx, with no zeroing pass and no atomics, so the results depend on the inputs alone.
// Kernel names start with max_pool so that the benchmark's kernel-time breakdown
// (bench/train_speed/kernel_breakdown.py) files them under pooling.
#include "ops/pool_kernels.h"
#include "ops/cuda_element_io.h"
#include "ops/pool_passes.h"

#include <algorithm>
#include <cstdint>

namespace tp::ops {
namespace {

constexpr int kPoolThreads = 256;
// Threads per multiprocessor wanted: as norm_act_kernels.cu's elementwise passes, about one
// resident wave (the most Ampere and Hopper hold), each thread striding over many rows.
constexpr int64_t kResidentThreadsPerSm = 2048;

template <typename T, int V>
__global__ void __launch_bounds__(kPoolThreads)
    max_pool3x3s2_forward_kernel(ApplyPlan plan, PoolGeometry geometry, const T* __restrict__ x, T* __restrict__ y,
                                 uint8_t* __restrict__ offsets) {
  max_pool_forward_thread<T, V>(static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, plan, geometry, x, y,
                                offsets);
}

template <typename T, int V>
__global__ void __launch_bounds__(kPoolThreads)
    max_pool3x3s2_backward_kernel(ApplyPlan plan, PoolGeometry geometry, const T* __restrict__ dy,
                                  const uint8_t* __restrict__ offsets, T* __restrict__ dx) {
  max_pool_backward_thread<T, V>(static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, plan, geometry, dy,
                                 offsets, dx);
}

PoolGeometry geometry_of(const MaxPoolPlan& plan) {
  PoolGeometry g;
  g.batch = plan.batch;
  g.height = plan.height;
  g.width = plan.width;
  g.out_height = max_pool3x3s2_output_size(plan.height);
  g.out_width = max_pool3x3s2_output_size(plan.width);
  return g;
}

/// The plan of a pass over `rows` rows of the pool's channels.
ApplyPlan pass_plan(const MaxPoolPlan& plan, int64_t rows) {
  return plan_apply(rows, plan.channels, plan.vector_width,
                    static_cast<int64_t>(std::max(plan.multiprocessors, 1)) * kResidentThreadsPerSm);
}

unsigned blocks_of(const ApplyPlan& apply) {
  return static_cast<unsigned>((apply.threads + kPoolThreads - 1) / kPoolThreads);
}

template <typename T, int V>
cudaError_t forward_at_width(const MaxPoolPlan& plan, const void* x, void* y, uint8_t* offsets, cudaStream_t stream) {
  const PoolGeometry g = geometry_of(plan);
  const ApplyPlan apply = pass_plan(plan, g.batch * g.out_height * g.out_width);
  max_pool3x3s2_forward_kernel<T, V><<<blocks_of(apply), kPoolThreads, 0, stream>>>(
      apply, g, static_cast<const T*>(x), static_cast<T*>(y), offsets);
  return cudaGetLastError();
}

template <typename T, int V>
cudaError_t backward_at_width(const MaxPoolPlan& plan, const void* dy, const uint8_t* offsets, void* dx,
                              cudaStream_t stream) {
  const PoolGeometry g = geometry_of(plan);
  const ApplyPlan apply = pass_plan(plan, g.batch * g.height * g.width);
  max_pool3x3s2_backward_kernel<T, V><<<blocks_of(apply), kPoolThreads, 0, stream>>>(
      apply, g, static_cast<const T*>(dy), offsets, static_cast<T*>(dx));
  return cudaGetLastError();
}

/// The pass `Pass<T, V>` at the plan's width: 8 for 2-byte types only (16 bytes an access).
template <typename T, template <typename, int> class Pass, typename... Args>
cudaError_t at_width(const MaxPoolPlan& plan, Args... args) {
  if (plan.batch < 1 || plan.channels < 1 || plan.height < 1 || plan.width < 1 ||
      plan.channels % plan.vector_width != 0)
    return cudaErrorInvalidValue;
  switch (plan.vector_width) {
    case 8:
      if constexpr (sizeof(T) == 2) {
        return Pass<T, 8>::run(plan, args...);
      } else {
        return cudaErrorInvalidValue;  // 32 bytes: wider than an access
      }
    case 4: return Pass<T, 4>::run(plan, args...);
    case 2: return Pass<T, 2>::run(plan, args...);
    case 1: return Pass<T, 1>::run(plan, args...);
    default: return cudaErrorInvalidValue;
  }
}

template <typename T, int V>
struct ForwardPass {
  static cudaError_t run(const MaxPoolPlan& plan, const void* x, void* y, uint8_t* offsets, cudaStream_t stream) {
    return forward_at_width<T, V>(plan, x, y, offsets, stream);
  }
};

template <typename T, int V>
struct BackwardPass {
  static cudaError_t run(const MaxPoolPlan& plan, const void* dy, const uint8_t* offsets, void* dx,
                         cudaStream_t stream) {
    return backward_at_width<T, V>(plan, dy, offsets, dx, stream);
  }
};

}  // namespace

cudaError_t launch_max_pool3x3s2_forward(const MaxPoolPlan& plan, ElementType type, const void* x, void* y,
                                         uint8_t* offsets, cudaStream_t stream) {
  switch (type) {
    case ElementType::kFloat: return at_width<float, ForwardPass>(plan, x, y, offsets, stream);
    case ElementType::kBFloat16: return at_width<__nv_bfloat16, ForwardPass>(plan, x, y, offsets, stream);
    case ElementType::kHalf: return at_width<__half, ForwardPass>(plan, x, y, offsets, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_max_pool3x3s2_backward(const MaxPoolPlan& plan, ElementType type, const void* dy,
                                          const uint8_t* offsets, void* dx, cudaStream_t stream) {
  switch (type) {
    case ElementType::kFloat: return at_width<float, BackwardPass>(plan, dy, offsets, dx, stream);
    case ElementType::kBFloat16: return at_width<__nv_bfloat16, BackwardPass>(plan, dy, offsets, dx, stream);
    case ElementType::kHalf: return at_width<__half, BackwardPass>(plan, dy, offsets, dx, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tp::ops
