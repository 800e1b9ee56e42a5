// The fused BatchNorm (training) + [residual add +] ReLU kernels, and BatchNorm alone
// (norm_act_kernels.h): the elementwise kernels are templated on the activation, the statistics
// and finalizes do not depend on it. Three launches each way: a per-channel reduction over row
// blocks (a 32 x 8 block: 32 consecutive channels, 8 row lanes; registers, then a shared-memory
// tree over the lanes), a finalize that combines a channel's partials (a 32 x 16 block: each lane
// a contiguous share of the row blocks, then a tree over the lanes, so the order is the plan's,
// never the scheduler's), and one elementwise pass. Arithmetic in fp32; the finalize combines in
// double, which costs little at C values and keeps long sums exact.
// Every kernel's name starts with batch_norm_ so that the benchmark's kernel-time breakdown
// (bench/train_speed/kernel_breakdown.py) files it under normalisation.
#include "ops/norm_act_kernels.h"
#include "ops/norm_act_math.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace tp::ops {
namespace {

constexpr int kTileChannels = 32;  // blockDim.x of the reductions: one warp reads 32 consecutive channels
constexpr int kTileRows = 8;       // blockDim.y: row lanes; a power of two (the tree halves it)
constexpr int64_t kMinRowsPerBlock = 64;
constexpr int64_t kBlocksPerSm = 8;  // reduction blocks wanted per multiprocessor
constexpr int kApplyThreads = 256;
constexpr int64_t kMaxApplyBlocks = int64_t{1} << 20;  // the apply kernels stride over the rest

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);  // round to nearest even, as at::BFloat16's conversion
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half(v);  // round to nearest even
}

/// V elements loaded or stored as one access (16 bytes at most; callers check the alignment).
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

/// The activation: ReLU that keeps NaN (as at::relu does: only values below zero become zero), or
/// the identity.
template <Activation A>
__device__ __forceinline__ float activate(float v) {
  if constexpr (A == Activation::kRelu) return v < 0.0F ? 0.0F : v;
  return v;
}

/// The activation's backward: ReLU's is threshold_backward's rule (the gradient passes where y > 0,
/// and where y is NaN); the identity's is dy, and `y` is not read.
template <Activation A>
__device__ __forceinline__ float activation_grad(float y, float dy) {
  if constexpr (A == Activation::kRelu) return y <= 0.0F ? 0.0F : dy;
  return dy;
}

/// The rows [begin, end) of this block (never empty: plan_reduction's promise).
struct RowRange {
  int64_t begin, end;
};
__device__ __forceinline__ RowRange block_rows(int64_t rows, int64_t rows_per_block) {
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_block;
  return {begin, begin + rows_per_block < rows ? begin + rows_per_block : rows};
}

/// Sums a[ty][tx] and b[ty][tx] over ty into [0][tx], in a fixed order. Every thread of the block
/// must call it (it synchronises).
__device__ __forceinline__ void sum_over_lanes(float (&a)[kTileRows][kTileChannels], float (&b)[kTileRows][kTileChannels]) {
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  __syncthreads();
  for (int stride = kTileRows / 2; stride > 0; stride /= 2) {
    if (ty < stride) {
      a[ty][tx] += a[ty + stride][tx];
      b[ty][tx] += b[ty + stride][tx];
    }
    __syncthreads();
  }
}

/// Per (row block, channel): the block's mean and M2 (sum of squared deviations). Each thread sums
/// x - shift and (x - shift)^2, shift being the block's first value of the channel, so the sums
/// stay near the data's spread and M2 = S2 - S1^2 / n loses little to cancellation.
template <typename T>
__global__ void __launch_bounds__(kTileChannels* kTileRows)
    batch_norm_act_stats(const T* __restrict__ x, int64_t rows, int64_t channels, int64_t rows_per_block,
                     float* __restrict__ part_mean, float* __restrict__ part_m2) {
  __shared__ float s1[kTileRows][kTileChannels];
  __shared__ float s2[kTileRows][kTileChannels];
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTileChannels + tx;
  const RowRange range = block_rows(rows, rows_per_block);
  const bool active = c < channels;
  float shift = 0.0F;
  float sum = 0.0F;
  float sum_sq = 0.0F;
  if (active) {
    shift = to_float(x[range.begin * channels + c]);
    for (int64_t r = range.begin + ty; r < range.end; r += kTileRows) {
      const float d = to_float(x[r * channels + c]) - shift;
      sum += d;
      sum_sq += d * d;
    }
  }
  s1[ty][tx] = sum;
  s2[ty][tx] = sum_sq;
  sum_over_lanes(s1, s2);
  if (ty == 0 && active) {
    const float n = static_cast<float>(range.end - range.begin);
    const float mean_shifted = s1[0][tx] / n;
    const int64_t at = static_cast<int64_t>(blockIdx.y) * channels + c;
    part_mean[at] = shift + mean_shifted;
    part_m2[at] = fmaxf(s2[0][tx] - s1[0][tx] * mean_shifted, 0.0F);
  }
}

/// Per channel: combines the partials (each lane its share in row-block order, then the lanes in
/// a fixed tree), writes the saved statistics, the apply pass's scale and shift, and updates the
/// running statistics as torch.nn.BatchNorm2d does (running_var takes the unbiased variance).
__global__ void __launch_bounds__(kTileChannels* kFinalizeLanes)
    batch_norm_act_finalize(const float* __restrict__ part_mean, const float* __restrict__ part_m2,
                            ReductionPlan plan, const float* __restrict__ weight, const float* __restrict__ bias,
                            float* __restrict__ running_mean, float* __restrict__ running_var,
                            float* __restrict__ save_mean, float* __restrict__ save_invstd,
                            float* __restrict__ scale, float* __restrict__ shift, double momentum, double eps) {
  __shared__ double sn[kFinalizeLanes][kTileChannels];
  __shared__ double smean[kFinalizeLanes][kTileChannels];
  __shared__ double sm2[kFinalizeLanes][kTileChannels];
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTileChannels + tx;
  const bool active = c < plan.channels;
  Moments m{0.0, 0.0, 0.0};
  if (active) {
    const BlockShare share = lane_share(plan.row_blocks, ty);
    for (int64_t b = share.begin; b < share.end; ++b) {
      const int64_t at = b * plan.channels + c;
      m = combine(m, static_cast<double>(block_row_count(b, plan.rows_per_block, plan.rows)), part_mean[at],
                  part_m2[at]);
    }
  }
  sn[ty][tx] = m.n;
  smean[ty][tx] = m.mean;
  sm2[ty][tx] = m.m2;
  __syncthreads();
  for (int stride = kFinalizeLanes / 2; stride > 0; stride /= 2) {
    if (ty < stride) {
      const Moments r = combine({sn[ty][tx], smean[ty][tx], sm2[ty][tx]}, sn[ty + stride][tx], smean[ty + stride][tx],
                                sm2[ty + stride][tx]);
      sn[ty][tx] = r.n;
      smean[ty][tx] = r.mean;
      sm2[ty][tx] = r.m2;
    }
    __syncthreads();
  }
  if (ty != 0 || !active) return;
  const double mean = smean[0][tx];
  const double rows = static_cast<double>(plan.rows);
  const double var = sm2[0][tx] / rows;
  const double invstd = 1.0 / sqrt(var + eps);
  save_mean[c] = static_cast<float>(mean);
  save_invstd[c] = static_cast<float>(invstd);
  const double s = static_cast<double>(weight[c]) * invstd;
  scale[c] = static_cast<float>(s);
  shift[c] = static_cast<float>(static_cast<double>(bias[c]) - mean * s);
  running_mean[c] = static_cast<float>((1.0 - momentum) * running_mean[c] + momentum * mean);
  running_var[c] = static_cast<float>((1.0 - momentum) * running_var[c] + momentum * (var * rows / (rows - 1.0)));
}

/// y = act(x * scale + shift [+ residual]), V elements (one Pack) per step; C % V == 0.
template <typename T, int V, bool kResidual, Activation A>
__global__ void batch_norm_act_apply(const T* __restrict__ x, const T* __restrict__ residual, T* __restrict__ y,
                              const float* __restrict__ scale, const float* __restrict__ shift, int64_t packs,
                              int64_t channels) {
  using P = Pack<T, V>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < packs; p += step) {
    const int64_t c0 = (p * V) % channels;
    const P in = reinterpret_cast<const P*>(x)[p];
    P res{};
    if constexpr (kResidual) res = reinterpret_cast<const P*>(residual)[p];
    P out;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      float v = fmaf(to_float(in.v[i]), scale[c0 + i], shift[c0 + i]);
      if constexpr (kResidual) v += to_float(res.v[i]);
      out.v[i] = from_float<T>(activate<A>(v));
    }
    reinterpret_cast<P*>(y)[p] = out;
  }
}

/// Per (row block, channel): sum of g and of g * (x - mean); with ReLU g = dy where y > 0, else 0;
/// without an activation g = dy (y unread).
template <typename T, Activation A>
__global__ void __launch_bounds__(kTileChannels* kTileRows)
    batch_norm_act_backward_reduce(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ y,
                      const float* __restrict__ save_mean, int64_t rows, int64_t channels, int64_t rows_per_block,
                      float* __restrict__ part_g, float* __restrict__ part_gx) {
  __shared__ float s1[kTileRows][kTileChannels];
  __shared__ float s2[kTileRows][kTileChannels];
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTileChannels + tx;
  const RowRange range = block_rows(rows, rows_per_block);
  const bool active = c < channels;
  float sum_g = 0.0F;
  float sum_gx = 0.0F;
  if (active) {
    const float mean = save_mean[c];
    for (int64_t r = range.begin + ty; r < range.end; r += kTileRows) {
      const int64_t i = r * channels + c;
      const float g = activation_grad<A>(A == Activation::kRelu ? to_float(y[i]) : 0.0F, to_float(dy[i]));
      sum_g += g;
      sum_gx += g * (to_float(x[i]) - mean);
    }
  }
  s1[ty][tx] = sum_g;
  s2[ty][tx] = sum_gx;
  sum_over_lanes(s1, s2);
  if (ty == 0 && active) {
    const int64_t at = static_cast<int64_t>(blockIdx.y) * channels + c;
    part_g[at] = s1[0][tx];
    part_gx[at] = s2[0][tx];
  }
}

/// Per channel: the partial sums (each lane its share in row-block order, then the lanes in a
/// fixed tree); grad_bias, grad_weight and the apply pass's coefficients:
/// dx = a * (g - b - (x - mean) * k).
__global__ void __launch_bounds__(kTileChannels* kFinalizeLanes)
    batch_norm_act_backward_finalize(const float* __restrict__ part_g, const float* __restrict__ part_gx,
                                     ReductionPlan plan, const float* __restrict__ weight,
                                     const float* __restrict__ save_invstd, float* __restrict__ grad_weight,
                                     float* __restrict__ grad_bias, float* __restrict__ coef_a,
                                     float* __restrict__ coef_b, float* __restrict__ coef_k) {
  __shared__ double sg[kFinalizeLanes][kTileChannels];
  __shared__ double sgx[kFinalizeLanes][kTileChannels];
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTileChannels + tx;
  const bool active = c < plan.channels;
  double sum_g = 0.0;
  double sum_gx = 0.0;
  if (active) {
    const BlockShare share = lane_share(plan.row_blocks, ty);
    for (int64_t b = share.begin; b < share.end; ++b) {
      sum_g += part_g[b * plan.channels + c];
      sum_gx += part_gx[b * plan.channels + c];
    }
  }
  sg[ty][tx] = sum_g;
  sgx[ty][tx] = sum_gx;
  __syncthreads();
  for (int stride = kFinalizeLanes / 2; stride > 0; stride /= 2) {
    if (ty < stride) {
      sg[ty][tx] += sg[ty + stride][tx];
      sgx[ty][tx] += sgx[ty + stride][tx];
    }
    __syncthreads();
  }
  if (ty != 0 || !active) return;
  const double rows = static_cast<double>(plan.rows);
  const double invstd = save_invstd[c];
  grad_bias[c] = static_cast<float>(sg[0][tx]);
  grad_weight[c] = static_cast<float>(sgx[0][tx] * invstd);
  coef_a[c] = static_cast<float>(static_cast<double>(weight[c]) * invstd);
  coef_b[c] = static_cast<float>(sg[0][tx] / rows);
  coef_k[c] = static_cast<float>(invstd * invstd * sgx[0][tx] / rows);
}

/// dx = a * (g - b - (x - mean) * k) and, with a residual, d_residual = g; V elements per step.
template <typename T, int V, bool kResidual, Activation A>
__global__ void batch_norm_act_backward_apply(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ y,
                               const float* __restrict__ save_mean, const float* __restrict__ coef_a,
                               const float* __restrict__ coef_b, const float* __restrict__ coef_k,
                               T* __restrict__ dx, T* __restrict__ d_residual, int64_t packs, int64_t channels) {
  using P = Pack<T, V>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < packs; p += step) {
    const int64_t c0 = (p * V) % channels;
    const P dyp = reinterpret_cast<const P*>(dy)[p];
    const P xp = reinterpret_cast<const P*>(x)[p];
    P yp{};
    if constexpr (A == Activation::kRelu) yp = reinterpret_cast<const P*>(y)[p];
    P dxp;
    P drp;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const int64_t c = c0 + i;
      const float g = activation_grad<A>(to_float(yp.v[i]), to_float(dyp.v[i]));
      dxp.v[i] = from_float<T>(coef_a[c] * (g - coef_b[c] - (to_float(xp.v[i]) - save_mean[c]) * coef_k[c]));
      if constexpr (kResidual) drp.v[i] = from_float<T>(g);
    }
    reinterpret_cast<P*>(dx)[p] = dxp;
    if constexpr (kResidual) reinterpret_cast<P*>(d_residual)[p] = drp;
  }
}

unsigned apply_blocks(int64_t packs) {
  const int64_t blocks = (packs + kApplyThreads - 1) / kApplyThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, kMaxApplyBlocks));
}

dim3 reduction_grid(const ReductionPlan& plan) {
  return dim3(static_cast<unsigned>((plan.channels + kTileChannels - 1) / kTileChannels),
              static_cast<unsigned>(plan.row_blocks));
}

unsigned finalize_blocks(const ReductionPlan& plan) {
  return static_cast<unsigned>((plan.channels + kTileChannels - 1) / kTileChannels);
}

template <typename T, int V, Activation A>
void launch_forward_apply(const ReductionPlan& plan, const ForwardArgs& a, const float* scale, const float* shift,
                          cudaStream_t stream) {
  const int64_t packs = plan.rows * plan.channels / V;
  const auto* x = static_cast<const T*>(a.x);
  auto* y = static_cast<T*>(a.y);
  if (a.residual != nullptr) {
    batch_norm_act_apply<T, V, true, A><<<apply_blocks(packs), kApplyThreads, 0, stream>>>(
        x, static_cast<const T*>(a.residual), y, scale, shift, packs, plan.channels);
  } else {
    batch_norm_act_apply<T, V, false, A><<<apply_blocks(packs), kApplyThreads, 0, stream>>>(
        x, nullptr, y, scale, shift, packs, plan.channels);
  }
}

template <typename T, Activation A>
void launch_forward_apply(const ReductionPlan& plan, const ForwardArgs& a, const float* scale, const float* shift,
                          cudaStream_t stream) {
  switch (a.vector_width) {
    case 8: launch_forward_apply<T, 8, A>(plan, a, scale, shift, stream); break;
    case 4: launch_forward_apply<T, 4, A>(plan, a, scale, shift, stream); break;
    case 2: launch_forward_apply<T, 2, A>(plan, a, scale, shift, stream); break;
    default: launch_forward_apply<T, 1, A>(plan, a, scale, shift, stream); break;
  }
}

template <typename T>
cudaError_t forward_typed(const ReductionPlan& plan, const ForwardArgs& a, cudaStream_t stream) {
  const int64_t partials = static_cast<int64_t>(plan.row_blocks) * plan.channels;
  float* part_mean = a.workspace;
  float* part_m2 = part_mean + partials;
  float* scale = part_m2 + partials;
  float* shift = scale + plan.channels;
  batch_norm_act_stats<T><<<reduction_grid(plan), dim3(kTileChannels, kTileRows), 0, stream>>>(
      static_cast<const T*>(a.x), plan.rows, plan.channels, plan.rows_per_block, part_mean, part_m2);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  batch_norm_act_finalize<<<finalize_blocks(plan), dim3(kTileChannels, kFinalizeLanes), 0, stream>>>(
      part_mean, part_m2, plan, a.weight, a.bias, a.running_mean, a.running_var, a.save_mean, a.save_invstd, scale,
      shift, a.momentum, a.eps);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (a.activation == Activation::kNone) {
    launch_forward_apply<T, Activation::kNone>(plan, a, scale, shift, stream);
  } else {
    launch_forward_apply<T, Activation::kRelu>(plan, a, scale, shift, stream);
  }
  return cudaGetLastError();
}

template <typename T, int V, Activation A>
void launch_backward_apply(const ReductionPlan& plan, const BackwardArgs& a, const float* coef_a,
                           const float* coef_b, const float* coef_k, cudaStream_t stream) {
  const int64_t packs = plan.rows * plan.channels / V;
  const auto* dy = static_cast<const T*>(a.dy);
  const auto* x = static_cast<const T*>(a.x);
  const auto* y = static_cast<const T*>(a.y);
  auto* dx = static_cast<T*>(a.dx);
  if (a.d_residual != nullptr) {
    batch_norm_act_backward_apply<T, V, true, A><<<apply_blocks(packs), kApplyThreads, 0, stream>>>(
        dy, x, y, a.save_mean, coef_a, coef_b, coef_k, dx, static_cast<T*>(a.d_residual), packs, plan.channels);
  } else {
    batch_norm_act_backward_apply<T, V, false, A><<<apply_blocks(packs), kApplyThreads, 0, stream>>>(
        dy, x, y, a.save_mean, coef_a, coef_b, coef_k, dx, nullptr, packs, plan.channels);
  }
}

/// The backward's reduction and apply for activation A (the finalize between them does not depend on it).
template <typename T, Activation A>
cudaError_t backward_passes(const ReductionPlan& plan, const BackwardArgs& a, float* part_g, float* part_gx,
                            float* coef_a, float* coef_b, float* coef_k, cudaStream_t stream) {
  batch_norm_act_backward_reduce<T, A><<<reduction_grid(plan), dim3(kTileChannels, kTileRows), 0, stream>>>(
      static_cast<const T*>(a.dy), static_cast<const T*>(a.x), static_cast<const T*>(a.y), a.save_mean, plan.rows,
      plan.channels, plan.rows_per_block, part_g, part_gx);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  batch_norm_act_backward_finalize<<<finalize_blocks(plan), dim3(kTileChannels, kFinalizeLanes), 0, stream>>>(
      part_g, part_gx, plan, a.weight, a.save_invstd, a.grad_weight, a.grad_bias, coef_a, coef_b, coef_k);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  switch (a.vector_width) {
    case 8: launch_backward_apply<T, 8, A>(plan, a, coef_a, coef_b, coef_k, stream); break;
    case 4: launch_backward_apply<T, 4, A>(plan, a, coef_a, coef_b, coef_k, stream); break;
    case 2: launch_backward_apply<T, 2, A>(plan, a, coef_a, coef_b, coef_k, stream); break;
    default: launch_backward_apply<T, 1, A>(plan, a, coef_a, coef_b, coef_k, stream); break;
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t backward_typed(const ReductionPlan& plan, const BackwardArgs& a, cudaStream_t stream) {
  const int64_t partials = static_cast<int64_t>(plan.row_blocks) * plan.channels;
  float* part_g = a.workspace;
  float* part_gx = part_g + partials;
  float* coef_a = part_gx + partials;
  float* coef_b = coef_a + plan.channels;
  float* coef_k = coef_b + plan.channels;
  if (a.activation == Activation::kNone)
    return backward_passes<T, Activation::kNone>(plan, a, part_g, part_gx, coef_a, coef_b, coef_k, stream);
  return backward_passes<T, Activation::kRelu>(plan, a, part_g, part_gx, coef_a, coef_b, coef_k, stream);
}

}  // namespace

ReductionPlan plan_reduction(int64_t rows, int64_t channels, int multiprocessors) {
  const int64_t tiles = (channels + kTileChannels - 1) / kTileChannels;
  const int64_t wanted = std::max<int64_t>(multiprocessors, 1) * kBlocksPerSm;
  int64_t blocks = (wanted + tiles - 1) / tiles;
  blocks = std::min(blocks, (rows + kMinRowsPerBlock - 1) / kMinRowsPerBlock);
  blocks = std::clamp<int64_t>(blocks, 1, 65535);
  ReductionPlan plan;
  plan.rows = rows;
  plan.channels = channels;
  plan.rows_per_block = (rows + blocks - 1) / blocks;
  // Recounted so that no block is empty: (row_blocks - 1) * rows_per_block < rows.
  plan.row_blocks = static_cast<int32_t>((rows + plan.rows_per_block - 1) / plan.rows_per_block);
  return plan;
}

int64_t forward_workspace_floats(const ReductionPlan& plan) {
  return 2 * static_cast<int64_t>(plan.row_blocks) * plan.channels + 2 * plan.channels;
}

int64_t backward_workspace_floats(const ReductionPlan& plan) {
  return 2 * static_cast<int64_t>(plan.row_blocks) * plan.channels + 3 * plan.channels;
}

int pick_vector_width(ElementType type, int64_t channels, const void* const* pointers, int count) {
  const int64_t element_bytes = type == ElementType::kFloat ? 4 : 2;
  for (int width = static_cast<int>(16 / element_bytes); width > 1; width /= 2) {
    if (channels % width != 0) continue;
    bool aligned = true;
    for (int i = 0; i < count; ++i)
      if (pointers[i] != nullptr && reinterpret_cast<uintptr_t>(pointers[i]) % (width * element_bytes) != 0)
        aligned = false;
    if (aligned) return width;
  }
  return 1;
}

cudaError_t launch_bn_act_forward(const ReductionPlan& plan, const ForwardArgs& args, cudaStream_t stream) {
  switch (args.type) {
    case ElementType::kFloat: return forward_typed<float>(plan, args, stream);
    case ElementType::kBFloat16: return forward_typed<__nv_bfloat16>(plan, args, stream);
    case ElementType::kHalf: return forward_typed<__half>(plan, args, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_bn_act_backward(const ReductionPlan& plan, const BackwardArgs& args, cudaStream_t stream) {
  switch (args.type) {
    case ElementType::kFloat: return backward_typed<float>(plan, args, stream);
    case ElementType::kBFloat16: return backward_typed<__nv_bfloat16>(plan, args, stream);
    case ElementType::kHalf: return backward_typed<__half>(plan, args, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tp::ops
