// The fused BatchNorm (training) + [residual add +] activation kernels (norm_act_kernels.h).
// Three launches each way:
// - a per-channel reduction over row blocks: a block of up to 32 pack columns (V channels each,
//   one 16-byte access) by a power of two of row lanes; each thread's sums in registers
//   (norm_act_passes.h), then a shared-memory tree over the lanes;
// - a finalize that combines a channel's partials: a 32 x 16 block, each lane a contiguous share
//   of the row blocks, then a tree over the lanes, so the order is the plan's, never the scheduler's;
// - one elementwise pass, each thread on fixed channels (norm_act_passes.h).
// The elementwise kernels are templated on the activation and, in the backward, on where the
// activation's gradient comes from (ReLU's mask read from the stored output, or the activation's
// input recomputed from x, which spares reading y). Arithmetic in fp32; the finalize combines in
// double, which costs little at C values and keeps long sums exact. The per-thread work and the
// arithmetic that needs no GPU (norm_act_passes.h, norm_act_math.h) are host and device code,
// checked on the CPU by tests/unit/ops.
// Every kernel's name starts with batch_norm_ so that the benchmark's kernel-time breakdown
// (bench/train_speed/kernel_breakdown.py) files it under normalisation.
#include "ops/norm_act_kernels.h"
#include "ops/cuda_element_io.h"  // CUDA's 16-bit types for the passes (and the reductions below)
#include "ops/norm_act_passes.h"
#include "ops/norm_act_math.h"

#include <algorithm>
#include <cstdint>

namespace tp::ops {

namespace {

constexpr int kTileChannels = 32;  // blockDim.x of the finalizes: 32 consecutive channels
constexpr int64_t kMinRowsPerBlock = 64;
constexpr int64_t kBlocksPerSm = 8;  // reduction blocks wanted per multiprocessor
constexpr int kApplyThreads = 256;
// The elementwise passes' threads per multiprocessor: the most Ampere and Hopper hold at once. The
// backward's registers (56-80 at 8 channels a thread) let only 768-1,024 be resident, so there the
// grid runs in two or three waves; each thread still covers many packs with one load of its
// coefficients.
constexpr int64_t kResidentThreadsPerSm = 2048;

/// The dynamic shared memory of a reduction block: two sums per channel per lane.
size_t reduction_shared_bytes(const ReductionTile& tile, int vector_width) {
  return 2 * sizeof(float) * static_cast<size_t>(tile.lanes) * static_cast<size_t>(tile.packs_x) *
         static_cast<size_t>(vector_width);
}

/// Sums every lane's a[] and b[] (V channels each) over the block's lanes, in a fixed tree
/// order; afterwards lane 0's a[] and b[] hold the totals of its pack column. Every thread of the
/// block calls it (it synchronises); `shared` is reduction_shared_bytes(tile, V).
template <int V>
__device__ __forceinline__ void sum_over_lanes(float* shared, const ReductionTile& tile, float (&a)[V], float (&b)[V]) {
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int row = tile.packs_x * V;  // floats per lane
  float* sa = shared;
  float* sb = shared + tile.lanes * row;
  TP_UNROLL
  for (int i = 0; i < V; ++i) {
    sa[ty * row + tx * V + i] = a[i];
    sb[ty * row + tx * V + i] = b[i];
  }
  __syncthreads();
  for (int stride = tile.lanes / 2; stride > 0; stride /= 2) {
    if (ty < stride) {
      TP_UNROLL
      for (int i = 0; i < V; ++i) {
        sa[ty * row + tx * V + i] += sa[(ty + stride) * row + tx * V + i];
        sb[ty * row + tx * V + i] += sb[(ty + stride) * row + tx * V + i];
      }
    }
    __syncthreads();
  }
  if (ty == 0) {
    TP_UNROLL
    for (int i = 0; i < V; ++i) {
      a[i] = sa[tx * V + i];
      b[i] = sb[tx * V + i];
    }
  }
}

/// Per (row block, channel): the block's mean and M2, from each thread's stats_thread_sums summed
/// over the lanes (stats_partial). Block (tile.packs_x, tile.lanes), grid (pack-column tiles, row blocks).
template <typename T, int V>
__global__ void __launch_bounds__(kReductionThreads)
    batch_norm_act_stats(ReductionPlan plan, ReductionTile tile, const T* __restrict__ x, float* __restrict__ part_mean,
                         float* __restrict__ part_m2) {
  extern __shared__ float shared[];
  const int64_t packs_per_row = plan.channels / V;
  const int64_t pack_column = static_cast<int64_t>(blockIdx.x) * tile.packs_x + threadIdx.x;
  const int64_t row_block = blockIdx.y;
  float shift[V], sum[V], sum_sq[V];
  const bool active = stats_thread_sums<T, V>(x, plan.rows, packs_per_row, plan.rows_per_block, row_block, pack_column,
                                              static_cast<int>(threadIdx.y), tile.lanes, shift, sum, sum_sq);
  sum_over_lanes<V>(shared, tile, sum, sum_sq);
  if (threadIdx.y != 0 || !active) return;
  const int64_t n = block_row_count(row_block, plan.rows_per_block, plan.rows);
  TP_UNROLL
  for (int i = 0; i < V; ++i) {
    const StatsPartial partial = stats_partial(shift[i], sum[i], sum_sq[i], n);
    const int64_t at = row_block * plan.channels + pack_column * V + i;
    part_mean[at] = partial.mean;
    part_m2[at] = partial.m2;
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
  // From the saved (rounded) statistics: a backward that recomputes the activation's input gets the same bits.
  const Affine affine = affine_coefficients(weight[c], bias[c], save_mean[c], save_invstd[c]);
  scale[c] = affine.scale;
  shift[c] = affine.shift;
  running_mean[c] = static_cast<float>((1.0 - momentum) * running_mean[c] + momentum * mean);
  running_var[c] = static_cast<float>((1.0 - momentum) * running_var[c] + momentum * (var * rows / (rows - 1.0)));
}

/// y = act(x * scale + shift [+ residual]): one thread of forward_apply_thread per index.
template <typename T, int V, bool kResidual, Activation A>
__global__ void __launch_bounds__(kApplyThreads)
    batch_norm_act_apply(ApplyPlan plan, const T* __restrict__ x, const T* __restrict__ residual, T* __restrict__ y,
                         const float* __restrict__ scale, const float* __restrict__ shift) {
  forward_apply_thread<T, V, kResidual, A>(static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, plan, x,
                                           residual, y, scale, shift);
}

/// Per (row block, channel): sum of g and of g * (x - mean), from each thread's
/// backward_thread_sums summed over the lanes. Block and grid as batch_norm_act_stats'.
template <typename T, int V, Activation A, bool kFromX>
__global__ void __launch_bounds__(kReductionThreads)
    batch_norm_act_backward_reduce(ReductionPlan plan, ReductionTile tile, const T* __restrict__ dy,
                                   const T* __restrict__ x, const T* __restrict__ y, const float* __restrict__ weight,
                                   const float* __restrict__ bias, const float* __restrict__ save_mean,
                                   const float* __restrict__ save_invstd, float* __restrict__ part_g,
                                   float* __restrict__ part_gx) {
  extern __shared__ float shared[];
  const int64_t packs_per_row = plan.channels / V;
  const int64_t pack_column = static_cast<int64_t>(blockIdx.x) * tile.packs_x + threadIdx.x;
  const int64_t row_block = blockIdx.y;
  float sum_g[V], sum_gx[V];
  const bool active = backward_thread_sums<T, V, A, kFromX>(
      dy, x, y, weight, bias, save_mean, save_invstd, plan.rows, packs_per_row, plan.rows_per_block, row_block,
      pack_column, static_cast<int>(threadIdx.y), tile.lanes, sum_g, sum_gx);
  sum_over_lanes<V>(shared, tile, sum_g, sum_gx);
  if (threadIdx.y != 0 || !active) return;
  TP_UNROLL
  for (int i = 0; i < V; ++i) {
    const int64_t at = row_block * plan.channels + pack_column * V + i;
    part_g[at] = sum_g[i];
    part_gx[at] = sum_gx[i];
  }
}

/// Per channel: the partial sums (each lane its share in row-block order, then the lanes in a
/// fixed tree); grad_bias, grad_weight and the apply pass's coefficients:
/// dx = a * (g - b - (x - mean) * k); and, where `bias` is given (the activation's input
/// recomputed), the forward's scale and shift for the apply pass.
__global__ void __launch_bounds__(kTileChannels* kFinalizeLanes)
    batch_norm_act_backward_finalize(const float* __restrict__ part_g, const float* __restrict__ part_gx,
                                     ReductionPlan plan, const float* __restrict__ weight,
                                     const float* __restrict__ bias, const float* __restrict__ save_mean,
                                     const float* __restrict__ save_invstd, float* __restrict__ grad_weight,
                                     float* __restrict__ grad_bias, float* __restrict__ coef_a,
                                     float* __restrict__ coef_b, float* __restrict__ coef_k,
                                     float* __restrict__ scale, float* __restrict__ shift) {
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
  if (bias != nullptr) {
    const Affine affine = affine_coefficients(weight[c], bias[c], save_mean[c], save_invstd[c]);
    scale[c] = affine.scale;
    shift[c] = affine.shift;
  }
}

/// dx = a * (g - b - (x - mean) * k) and, with a residual, d_residual = g: one thread of
/// backward_apply_thread per index.
template <typename T, int V, bool kResidual, Activation A, bool kFromX>
__global__ void __launch_bounds__(kApplyThreads)
    batch_norm_act_backward_apply(ApplyPlan plan, const T* __restrict__ dy, const T* __restrict__ x,
                                  const T* __restrict__ y, BackwardCoefficients coef, T* __restrict__ dx,
                                  T* __restrict__ d_residual) {
  backward_apply_thread<T, V, kResidual, A, kFromX>(static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, plan,
                                                    dy, x, y, coef, dx, d_residual);
}

/// The elementwise passes' plan: kResidentThreadsPerSm threads per multiprocessor, each keeping
/// its channels (norm_act_passes.h).
ApplyPlan apply_plan(const ReductionPlan& plan) {
  return plan_apply(plan.rows, plan.channels, plan.vector_width,
                    static_cast<int64_t>(std::max(plan.multiprocessors, 1)) * kResidentThreadsPerSm);
}

unsigned apply_blocks(const ApplyPlan& plan) {
  return static_cast<unsigned>((plan.threads + kApplyThreads - 1) / kApplyThreads);
}

/// The reduction grid's pack-column tiles for rows of `packs_per_row` packs.
int64_t column_tiles(int64_t packs_per_row, const ReductionTile& tile) {
  return (packs_per_row + tile.packs_x - 1) / tile.packs_x;
}

/// A reduction launch's shape: blocks of `tile`, a grid of pack-column tiles by row blocks.
struct ReductionLaunch {
  ReductionTile tile;
  dim3 grid, block;
  size_t shared_bytes;
};

ReductionLaunch reduction_launch(const ReductionPlan& plan) {
  ReductionLaunch launch;
  const int64_t packs_per_row = plan.channels / plan.vector_width;
  launch.tile = reduction_tile(packs_per_row);
  launch.grid = dim3(static_cast<unsigned>(column_tiles(packs_per_row, launch.tile)),
                     static_cast<unsigned>(plan.row_blocks));
  launch.block = dim3(static_cast<unsigned>(launch.tile.packs_x), static_cast<unsigned>(launch.tile.lanes));
  launch.shared_bytes = reduction_shared_bytes(launch.tile, plan.vector_width);
  return launch;
}

unsigned finalize_blocks(const ReductionPlan& plan) {
  return static_cast<unsigned>((plan.channels + kTileChannels - 1) / kTileChannels);
}

template <typename T, int V, Activation A>
void launch_forward_apply(const ReductionPlan& plan, const ForwardArgs& a, const float* scale, const float* shift,
                          cudaStream_t stream) {
  const ApplyPlan apply = apply_plan(plan);
  const auto* x = static_cast<const T*>(a.x);
  auto* y = static_cast<T*>(a.y);
  if constexpr (A == Activation::kRelu) {  // the only activation a residual comes with (forward_passes checks)
    if (a.residual != nullptr) {
      batch_norm_act_apply<T, V, true, A><<<apply_blocks(apply), kApplyThreads, 0, stream>>>(
          apply, x, static_cast<const T*>(a.residual), y, scale, shift);
      return;
    }
  }
  batch_norm_act_apply<T, V, false, A><<<apply_blocks(apply), kApplyThreads, 0, stream>>>(apply, x, nullptr, y, scale,
                                                                                         shift);
}

/// The forward's three launches for element type T at pack width V.
template <typename T, int V>
cudaError_t forward_passes(const ReductionPlan& plan, const ForwardArgs& a, cudaStream_t stream) {
  // Refused before any launch: the statistics pass updates the running statistics in place.
  const bool known = a.activation == Activation::kRelu || a.activation == Activation::kNone ||
                     a.activation == Activation::kSilu || a.activation == Activation::kHardswish;
  if (!known || (a.residual != nullptr && a.activation != Activation::kRelu)) return cudaErrorInvalidValue;
  const int64_t partials = static_cast<int64_t>(plan.row_blocks) * plan.channels;
  float* part_mean = a.workspace;
  float* part_m2 = part_mean + partials;
  float* scale = part_m2 + partials;
  float* shift = scale + plan.channels;
  const ReductionLaunch r = reduction_launch(plan);
  batch_norm_act_stats<T, V><<<r.grid, r.block, r.shared_bytes, stream>>>(plan, r.tile, static_cast<const T*>(a.x),
                                                                         part_mean, part_m2);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  batch_norm_act_finalize<<<finalize_blocks(plan), dim3(kTileChannels, kFinalizeLanes), 0, stream>>>(
      part_mean, part_m2, plan, a.weight, a.bias, a.running_mean, a.running_var, a.save_mean, a.save_invstd, scale,
      shift, a.momentum, a.eps);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  switch (a.activation) {
    case Activation::kRelu: launch_forward_apply<T, V, Activation::kRelu>(plan, a, scale, shift, stream); break;
    case Activation::kNone: launch_forward_apply<T, V, Activation::kNone>(plan, a, scale, shift, stream); break;
    case Activation::kSilu: launch_forward_apply<T, V, Activation::kSilu>(plan, a, scale, shift, stream); break;
    case Activation::kHardswish:
      launch_forward_apply<T, V, Activation::kHardswish>(plan, a, scale, shift, stream);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t forward_typed(const ReductionPlan& plan, const ForwardArgs& a, cudaStream_t stream) {
  switch (plan.vector_width) {
    case 8:
      if constexpr (sizeof(T) == 2) {
        return forward_passes<T, 8>(plan, a, stream);
      } else {
        return cudaErrorInvalidValue;  // 32 bytes: wider than an access
      }
    case 4: return forward_passes<T, 4>(plan, a, stream);
    case 2: return forward_passes<T, 2>(plan, a, stream);
    case 1: return forward_passes<T, 1>(plan, a, stream);
    default: return cudaErrorInvalidValue;
  }
}

/// The backward's per-channel buffers in its workspace (backward_workspace_floats).
struct BackwardBuffers {
  float *part_g, *part_gx, *coef_a, *coef_b, *coef_k, *scale, *shift;
};

/// The backward's three launches for element type T, pack width V, activation A and mask source
/// kFromX (the finalize between the reduction and the apply depends on neither).
template <typename T, int V, Activation A, bool kFromX>
cudaError_t backward_passes(const ReductionPlan& plan, const BackwardArgs& a, const BackwardBuffers& w,
                            cudaStream_t stream) {
  const auto* dy = static_cast<const T*>(a.dy);
  const auto* x = static_cast<const T*>(a.x);
  const auto* y = static_cast<const T*>(a.y);
  const ReductionLaunch r = reduction_launch(plan);
  batch_norm_act_backward_reduce<T, V, A, kFromX><<<r.grid, r.block, r.shared_bytes, stream>>>(
      plan, r.tile, dy, x, y, a.weight, a.bias, a.save_mean, a.save_invstd, w.part_g, w.part_gx);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  batch_norm_act_backward_finalize<<<finalize_blocks(plan), dim3(kTileChannels, kFinalizeLanes), 0, stream>>>(
      w.part_g, w.part_gx, plan, a.weight, kFromX ? a.bias : nullptr, a.save_mean, a.save_invstd, a.grad_weight,
      a.grad_bias, w.coef_a, w.coef_b, w.coef_k, w.scale, w.shift);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const ApplyPlan apply = apply_plan(plan);
  auto* dx = static_cast<T*>(a.dx);
  const BackwardCoefficients coef{w.coef_a, w.coef_b, w.coef_k, a.save_mean, w.scale, w.shift};
  if constexpr (!kFromX) {  // a residual's gradient comes with the stored-mask path only (backward_typed checks)
    if (a.d_residual != nullptr) {
      batch_norm_act_backward_apply<T, V, true, A, kFromX><<<apply_blocks(apply), kApplyThreads, 0, stream>>>(
          apply, dy, x, y, coef, dx, static_cast<T*>(a.d_residual));
      return cudaGetLastError();
    }
  }
  batch_norm_act_backward_apply<T, V, false, A, kFromX><<<apply_blocks(apply), kApplyThreads, 0, stream>>>(
      apply, dy, x, y, coef, dx, nullptr);
  return cudaGetLastError();
}

/// backward_passes for the args' activation and mask source.
template <typename T, int V>
cudaError_t backward_for_activation(const ReductionPlan& plan, const BackwardArgs& a, const BackwardBuffers& w,
                                    cudaStream_t stream) {
  const bool from_x = a.bias != nullptr;
  if (from_x && a.d_residual != nullptr) return cudaErrorInvalidValue;
  switch (a.activation) {
    case Activation::kNone: return backward_passes<T, V, Activation::kNone, false>(plan, a, w, stream);
    case Activation::kRelu:
      return from_x ? backward_passes<T, V, Activation::kRelu, true>(plan, a, w, stream)
                    : backward_passes<T, V, Activation::kRelu, false>(plan, a, w, stream);
    case Activation::kSilu:
      return from_x ? backward_passes<T, V, Activation::kSilu, true>(plan, a, w, stream) : cudaErrorInvalidValue;
    case Activation::kHardswish:
      return from_x ? backward_passes<T, V, Activation::kHardswish, true>(plan, a, w, stream) : cudaErrorInvalidValue;
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t backward_typed(const ReductionPlan& plan, const BackwardArgs& a, cudaStream_t stream) {
  const int64_t partials = static_cast<int64_t>(plan.row_blocks) * plan.channels;
  BackwardBuffers w{};
  w.part_g = a.workspace;
  w.part_gx = w.part_g + partials;
  w.coef_a = w.part_gx + partials;
  w.coef_b = w.coef_a + plan.channels;
  w.coef_k = w.coef_b + plan.channels;
  w.scale = w.coef_k + plan.channels;
  w.shift = w.scale + plan.channels;
  switch (plan.vector_width) {
    case 8:
      if constexpr (sizeof(T) == 2) {
        return backward_for_activation<T, 8>(plan, a, w, stream);
      } else {
        return cudaErrorInvalidValue;  // 32 bytes: wider than an access
      }
    case 4: return backward_for_activation<T, 4>(plan, a, w, stream);
    case 2: return backward_for_activation<T, 2>(plan, a, w, stream);
    case 1: return backward_for_activation<T, 1>(plan, a, w, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

ReductionPlan plan_reduction(int64_t rows, int64_t channels, int vector_width, int multiprocessors) {
  const int64_t tiles = column_tiles(channels / vector_width, reduction_tile(channels / vector_width));
  const int64_t wanted = std::max<int64_t>(multiprocessors, 1) * kBlocksPerSm;
  int64_t blocks = (wanted + tiles - 1) / tiles;
  blocks = std::min(blocks, (rows + kMinRowsPerBlock - 1) / kMinRowsPerBlock);
  blocks = std::clamp<int64_t>(blocks, 1, 65535);
  ReductionPlan plan;
  plan.rows = rows;
  plan.channels = channels;
  plan.vector_width = vector_width;
  plan.multiprocessors = multiprocessors;
  plan.rows_per_block = (rows + blocks - 1) / blocks;
  // Recounted so that no block is empty: (row_blocks - 1) * rows_per_block < rows.
  plan.row_blocks = static_cast<int32_t>((rows + plan.rows_per_block - 1) / plan.rows_per_block);
  return plan;
}

int64_t forward_workspace_floats(const ReductionPlan& plan) {
  return 2 * static_cast<int64_t>(plan.row_blocks) * plan.channels + 2 * plan.channels;
}

int64_t backward_workspace_floats(const ReductionPlan& plan) {
  return 2 * static_cast<int64_t>(plan.row_blocks) * plan.channels + 5 * plan.channels;
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
