// The per-thread work of the fused BatchNorm kernels (norm_act_kernels.cu), as host and device
// code: the elementwise passes whole, and the reductions' accumulation (the block's tree over its
// row lanes, which needs a barrier, stays in the kernels). The kernels call these with their
// thread's indices, and a CPU test (tests/unit/ops/norm_act_passes_test.cpp) runs every thread of
// a launch on the CPU and holds the result against a direct computation, so the indexing (which
// thread reads and writes which elements with which channel's coefficients) is checked without a
// GPU.
//
// Why each thread handles packs of V channels and keeps them: x is M rows of C channels in
// channels-last memory. A pack is one 16-byte access (8 bfloat16 or half, 4 float); a thread that
// keeps its channels loads their coefficients once into registers and never divides a 64-bit index.
// The earlier kernels read one element per access in the reductions and, in the elementwise
// passes, took a modulo and 2 to 6 coefficient loads for every element: they ran at 48-68% of the
// H200's memory bandwidth (bench/gpu/2026-11-28-h200.md).
#pragma once

#include <stdint.h>

#include "ops/norm_act_math.h"

namespace tp::ops {

/// to_float(T) and from_float(float) of an element type; specialised where the type is defined
/// (norm_act_kernels.cu for CUDA's bfloat16 and half, the CPU test for LibTorch's).
template <typename T>
struct ElementIo;

template <>
struct ElementIo<float> {
  TP_HOST_DEVICE static float to_float(float v) { return v; }
  TP_HOST_DEVICE static float from_float(float v) { return v; }
};

/// V elements loaded or stored as one access (16 bytes at most; callers check the alignment).
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

/// How an elementwise pass splits the packs among threads: thread t < threads starts at pack t
/// and strides by `threads`, a multiple of packs_per_row, so its channels are those of pack
/// t % packs_per_row throughout. Threads at or past `threads` do nothing.
struct ApplyPlan {
  int64_t packs = 0;          ///< M * C / V
  int64_t packs_per_row = 0;  ///< C / V
  int64_t threads = 0;        ///< a multiple of packs_per_row, >= packs_per_row
};

/// Thread t's pack column under `plan` and the rows it visits in that column: from `first` to
/// before `end`, every `step` rows (the walk of a thread that keeps its channels).
struct ThreadRows {
  int64_t column, first, end, step;
};
TP_HOST_DEVICE inline ThreadRows thread_rows(int64_t t, const ApplyPlan& plan) {
  return {t % plan.packs_per_row, t / plan.packs_per_row, plan.packs / plan.packs_per_row,
          plan.threads / plan.packs_per_row};
}

/// The plan for `rows` rows of `channels` channels in packs of `vector_width` (which divides
/// channels) with at most `max_threads` threads rounded down to whole rows (about a resident wave,
/// so each thread loads its coefficients once for many packs), never fewer than one row's worth
/// nor more than the rows there are.
TP_HOST_DEVICE inline ApplyPlan plan_apply(int64_t rows, int64_t channels, int vector_width, int64_t max_threads) {
  ApplyPlan plan;
  plan.packs_per_row = channels / vector_width;
  plan.packs = rows * plan.packs_per_row;
  const int64_t wanted_rows = max_threads / plan.packs_per_row;
  const int64_t thread_rows = wanted_rows < 1 ? 1 : (wanted_rows < rows ? wanted_rows : rows);
  plan.threads = thread_rows * plan.packs_per_row;
  return plan;
}

/// The shape of a reduction block: `packs_x` pack columns by `lanes` row lanes, at most
/// kReductionThreads threads; `lanes` is a power of two (the tree over the lanes halves it).
struct ReductionTile {
  int packs_x = 1;
  int lanes = 1;
};

inline constexpr int kReductionThreads = 256;

/// The tile for rows of `packs_per_row` packs: up to 32 pack columns (a warp reads 512 contiguous
/// bytes of a row), the rest of the block's threads on row lanes.
TP_HOST_DEVICE inline ReductionTile reduction_tile(int64_t packs_per_row) {
  ReductionTile tile;
  tile.packs_x = packs_per_row < 32 ? static_cast<int>(packs_per_row) : 32;
  while (tile.lanes * 2 * tile.packs_x <= kReductionThreads) tile.lanes *= 2;
  return tile;
}

/// A channel's partial over a row block, from sums of d = x - shift (shift: the block's first
/// value of the channel): its mean and M2 (sum of squared deviations). Shifting keeps the sums
/// near the data's spread, so M2 = S2 - S1^2 / n loses little to cancellation.
struct StatsPartial {
  float mean, m2;
};
TP_HOST_DEVICE inline StatsPartial stats_partial(float shift, float sum, float sum_sq, int64_t n) {
  const float mean_shifted = sum / static_cast<float>(n);
  const float m2 = sum_sq - sum * mean_shifted;
  return {shift + mean_shifted, m2 > 0.0F ? m2 : 0.0F};
}

/// The forward statistics of one thread: for its pack column's V channels, over the rows of row
/// block `row_block` that fall on its lane (begin + lane, then every `lanes` rows), the sums of d
/// and d^2 with d = x - shift. Returns false (sums zero) when the pack column is past the row's end.
template <typename T, int V>
TP_HOST_DEVICE inline bool stats_thread_sums(const T* __restrict__ x, int64_t rows, int64_t packs_per_row,
                                             int64_t rows_per_block, int64_t row_block, int64_t pack_column, int lane,
                                             int lanes, float (&shift)[V], float (&sum)[V], float (&sum_sq)[V]) {
  using Io = ElementIo<T>;
  using P = Pack<T, V>;
  TP_UNROLL
  for (int i = 0; i < V; ++i) shift[i] = sum[i] = sum_sq[i] = 0.0F;
  if (pack_column >= packs_per_row) return false;
  const int64_t begin = row_block * rows_per_block;
  const int64_t end = begin + block_row_count(row_block, rows_per_block, rows);
  const P first = reinterpret_cast<const P*>(x)[begin * packs_per_row + pack_column];
  TP_UNROLL
  for (int i = 0; i < V; ++i) shift[i] = Io::to_float(first.v[i]);
  for (int64_t r = begin + lane; r < end; r += lanes) {
    const P in = reinterpret_cast<const P*>(x)[r * packs_per_row + pack_column];
    TP_UNROLL
    for (int i = 0; i < V; ++i) {
      const float d = Io::to_float(in.v[i]) - shift[i];
      sum[i] += d;
      sum_sq[i] += d * d;
    }
  }
  return true;
}

/// g, the gradient at the activation's input, for one element. kFromX: the input v is recomputed
/// from x with the forward's own arithmetic (fmaf(x, scale, shift), scale and shift from
/// affine_coefficients), and ReLU's mask is taken at v rounded to T as the forward stored it, so
/// it is the forward's y > 0 bit for bit. Otherwise (ReLU only) the mask is the stored y's.
/// Without an activation g = dy.
template <typename T, Activation A, bool kFromX>
TP_HOST_DEVICE inline float input_gradient(float x, T y, float dy, float scale, float shift) {
  using Io = ElementIo<T>;
  if constexpr (A == Activation::kNone) {
    return dy;
  } else if constexpr (!kFromX) {
    static_assert(A == Activation::kRelu, "only ReLU's mask can be read from the stored output");
    return relu_grad(Io::to_float(y), dy);
  } else {
    const float v = fmaf(x, scale, shift);
    if constexpr (A == Activation::kRelu) return relu_grad(Io::to_float(Io::from_float(activate<A>(v))), dy);
    return activation_input_grad<A>(v, dy);
  }
}

/// The backward reduction of one thread: for its pack column's V channels, over the rows of row
/// block `row_block` on its lane, the sums of g and g * (x - mean), g as input_gradient gives it
/// (y read for ReLU's stored mask only; weight, bias and invstd only with kFromX). Returns false
/// (sums zero) when the pack column is past the row's end.
template <typename T, int V, Activation A, bool kFromX>
TP_HOST_DEVICE inline bool backward_thread_sums(const T* __restrict__ dy, const T* __restrict__ x,
                                                const T* __restrict__ y, const float* __restrict__ weight,
                                                const float* __restrict__ bias, const float* __restrict__ save_mean,
                                                const float* __restrict__ save_invstd, int64_t rows,
                                                int64_t packs_per_row, int64_t rows_per_block, int64_t row_block,
                                                int64_t pack_column, int lane, int lanes, float (&sum_g)[V],
                                                float (&sum_gx)[V]) {
  using Io = ElementIo<T>;
  using P = Pack<T, V>;
  TP_UNROLL
  for (int i = 0; i < V; ++i) sum_g[i] = sum_gx[i] = 0.0F;
  if (pack_column >= packs_per_row) return false;
  const int64_t c0 = pack_column * V;
  float mean[V], scale[V], shift[V];
  TP_UNROLL
  for (int i = 0; i < V; ++i) {
    mean[i] = save_mean[c0 + i];
    Affine affine{0.0F, 0.0F};
    if constexpr (kFromX) affine = affine_coefficients(weight[c0 + i], bias[c0 + i], mean[i], save_invstd[c0 + i]);
    scale[i] = affine.scale;
    shift[i] = affine.shift;
  }
  const int64_t begin = row_block * rows_per_block;
  const int64_t end = begin + block_row_count(row_block, rows_per_block, rows);
  for (int64_t r = begin + lane; r < end; r += lanes) {
    const int64_t p = r * packs_per_row + pack_column;
    const P dyp = reinterpret_cast<const P*>(dy)[p];
    const P xp = reinterpret_cast<const P*>(x)[p];
    P yp{};
    if constexpr (A == Activation::kRelu && !kFromX) yp = reinterpret_cast<const P*>(y)[p];
    TP_UNROLL
    for (int i = 0; i < V; ++i) {
      const float xi = Io::to_float(xp.v[i]);
      const float g = input_gradient<T, A, kFromX>(xi, yp.v[i], Io::to_float(dyp.v[i]), scale[i], shift[i]);
      sum_g[i] += g;
      sum_gx[i] += g * (xi - mean[i]);
    }
  }
  return true;
}

/// Thread t of the forward's pass: y = act(x * scale + shift [+ residual]) for its packs.
template <typename T, int V, bool kResidual, Activation A>
TP_HOST_DEVICE inline void forward_apply_thread(int64_t t, const ApplyPlan& plan, const T* __restrict__ x,
                                                const T* __restrict__ residual, T* __restrict__ y,
                                                const float* __restrict__ scale, const float* __restrict__ shift) {
  using Io = ElementIo<T>;
  using P = Pack<T, V>;
  if (t >= plan.threads) return;
  const int64_t c0 = (t % plan.packs_per_row) * V;
  float s[V], b[V];
  TP_UNROLL
  for (int i = 0; i < V; ++i) {
    s[i] = scale[c0 + i];
    b[i] = shift[c0 + i];
  }
  for (int64_t p = t; p < plan.packs; p += plan.threads) {
    const P in = reinterpret_cast<const P*>(x)[p];
    P res{};
    if constexpr (kResidual) res = reinterpret_cast<const P*>(residual)[p];
    P out;
    TP_UNROLL
    for (int i = 0; i < V; ++i) {
      float v = fmaf(Io::to_float(in.v[i]), s[i], b[i]);
      if constexpr (kResidual) v += Io::to_float(res.v[i]);
      out.v[i] = Io::from_float(activate<A>(v));
    }
    reinterpret_cast<P*>(y)[p] = out;
  }
}

/// The backward pass's per-channel inputs: dx = a * (g - b - (x - mean) * k); scale and shift
/// (read only with kFromX) recompute the activation's input.
struct BackwardCoefficients {
  const float *a, *b, *k, *mean, *scale, *shift;
};

/// Thread t of the backward's pass: dx and, with kResidual, d_residual = g for its packs.
template <typename T, int V, bool kResidual, Activation A, bool kFromX>
TP_HOST_DEVICE inline void backward_apply_thread(int64_t t, const ApplyPlan& plan, const T* __restrict__ dy,
                                                 const T* __restrict__ x, const T* __restrict__ y,
                                                 const BackwardCoefficients& coef, T* __restrict__ dx,
                                                 T* __restrict__ d_residual) {
  using Io = ElementIo<T>;
  using P = Pack<T, V>;
  if (t >= plan.threads) return;
  const int64_t c0 = (t % plan.packs_per_row) * V;
  float a[V], b[V], k[V], mean[V], scale[V], shift[V];
  TP_UNROLL
  for (int i = 0; i < V; ++i) {
    a[i] = coef.a[c0 + i];
    b[i] = coef.b[c0 + i];
    k[i] = coef.k[c0 + i];
    mean[i] = coef.mean[c0 + i];
    scale[i] = kFromX ? coef.scale[c0 + i] : 0.0F;
    shift[i] = kFromX ? coef.shift[c0 + i] : 0.0F;
  }
  for (int64_t p = t; p < plan.packs; p += plan.threads) {
    const P dyp = reinterpret_cast<const P*>(dy)[p];
    const P xp = reinterpret_cast<const P*>(x)[p];
    P yp{};
    if constexpr (A == Activation::kRelu && !kFromX) yp = reinterpret_cast<const P*>(y)[p];
    P dxp;
    P drp;
    TP_UNROLL
    for (int i = 0; i < V; ++i) {
      const float xi = Io::to_float(xp.v[i]);
      const float g = input_gradient<T, A, kFromX>(xi, yp.v[i], Io::to_float(dyp.v[i]), scale[i], shift[i]);
      dxp.v[i] = Io::from_float(a[i] * (g - b[i] - (xi - mean[i]) * k[i]));
      if constexpr (kResidual) drp.v[i] = Io::from_float(g);
    }
    reinterpret_cast<P*>(dx)[p] = dxp;
    if constexpr (kResidual) reinterpret_cast<P*>(d_residual)[p] = drp;
  }
}

}  // namespace tp::ops
