// The per-thread work of the fused max pool kernels (pool_kernels.cu): kernel 3, stride 2,
// padding 1, dilation 1, floor mode (ResNet's stem), as host and device code. The kernels call
// these with their thread's index, and a CPU test (tests/unit/ops/pool_passes_test.cpp) runs every
// thread of a launch on the CPU and holds the results against LibTorch's own max_pool2d kernels,
// so the indexing and the tie, NaN and summation rules are checked without a GPU.
//
// Layout: x is [N, C, H, W] in channels-last memory, read as rows (n, h, w) of C channels; y and
// the offsets are [N, C, OH, OW] the same way. A thread keeps one pack of V channels (one 16-byte
// access at most) and strides over rows, as norm_act_passes.h's elementwise passes do.
//
// Why offsets: PyTorch saves an int64 index per output element (h * W + w), 8 bytes against y's 2
// in bfloat16; the window's position of the maximum, (h - h0) * 3 + (w - w0) in 0..8, fits a byte,
// and the backward recomputes h and w from the output's position.
#pragma once

#include <math.h>  // INFINITY (host and device)
#include <stdint.h>

#include "ops/norm_act_passes.h"  // ElementIo, Pack, ApplyPlan, plan_apply

namespace tp::ops {

/// The output size along H or W of a 3x3, stride 2, padding 1 max pool (floor mode):
/// (size + 2 - 3) / 2 + 1; 1 for size 1.
TP_HOST_DEVICE inline int64_t max_pool3x3s2_output_size(int64_t size) { return (size + 2 * 1 - 3) / 2 + 1; }

/// The pool's sizes: input [batch, height, width], output [batch, out_height, out_width], all
/// with the same channels (the plan's).
struct PoolGeometry {
  int64_t batch = 0, height = 0, width = 0, out_height = 0, out_width = 0;
};

/// The window of output o starts at input o * 2 - 1 (before clipping to the input).
TP_HOST_DEVICE inline int64_t pool_window_start(int64_t o) { return o * 2 - 1; }

/// The first output whose window covers input i (PyTorch's p_start for kernel 3, stride 2,
/// padding 1), and one past the last (p_end): outputs whose window covers i, ascending.
TP_HOST_DEVICE inline int64_t pool_first_output(int64_t i) { return i + 1 < 3 ? 0 : (i + 1 - 3) / 2 + 1; }
TP_HOST_DEVICE inline int64_t pool_output_end(int64_t i, int64_t out_size) {
  const int64_t end = (i + 1) / 2 + 1;
  return end < out_size ? end : out_size;
}

/// NaN test that needs neither <cmath> on the device nor isnan's overloads on the host.
TP_HOST_DEVICE inline bool is_nan(float v) { return v != v; }

/// Thread t of the forward (plan: rows = batch * out_height * out_width, packs of V channels): for
/// each of its output rows and its V channels, the maximum over the window clipped to the input,
/// scanned row-major (h outer, w inner), by PyTorch's rule: starting from -inf, an element is taken
/// when it is greater than the maximum so far or NaN (so the first of equal maxima stays, and the
/// last NaN wins). y gets the taken element's own bits; offsets gets its window position
/// (h - h0) * 3 + (w - w0), or the first valid position when nothing is taken (a window all -inf).
template <typename T, int V>
TP_HOST_DEVICE inline void max_pool_forward_thread(int64_t t, const ApplyPlan& plan, const PoolGeometry& g,
                                                   const T* __restrict__ x, T* __restrict__ y,
                                                   uint8_t* __restrict__ offsets) {
  using Io = ElementIo<T>;
  using P = Pack<T, V>;
  using O = Pack<uint8_t, V>;
  if (t >= plan.threads) return;
  const int64_t packs_per_row = plan.packs_per_row;
  const ThreadRows walk = thread_rows(t, plan);
  const int64_t column = walk.column;
  for (int64_t r = walk.first; r < walk.end; r += walk.step) {
    const int64_t ow = r % g.out_width;
    const int64_t oh = (r / g.out_width) % g.out_height;
    const int64_t n = r / g.out_width / g.out_height;
    const int64_t h0 = pool_window_start(oh);
    const int64_t w0 = pool_window_start(ow);
    const int64_t h_begin = h0 < 0 ? 0 : h0;
    const int64_t w_begin = w0 < 0 ? 0 : w0;
    const int64_t h_end = h0 + 3 < g.height ? h0 + 3 : g.height;
    const int64_t w_end = w0 + 3 < g.width ? w0 + 3 : g.width;
    float best[V];
    P out;
    O at;
    TP_UNROLL
    for (int i = 0; i < V; ++i) {
      best[i] = -INFINITY;
      out.v[i] = Io::from_float(-INFINITY);
      at.v[i] = static_cast<uint8_t>((h_begin - h0) * 3 + (w_begin - w0));
    }
    for (int64_t h = h_begin; h < h_end; ++h) {
      for (int64_t w = w_begin; w < w_end; ++w) {
        const P in = reinterpret_cast<const P*>(x)[((n * g.height + h) * g.width + w) * packs_per_row + column];
        const auto position = static_cast<uint8_t>((h - h0) * 3 + (w - w0));
        TP_UNROLL
        for (int i = 0; i < V; ++i) {
          const float v = Io::to_float(in.v[i]);
          if (v > best[i] || is_nan(v)) {
            best[i] = v;
            out.v[i] = in.v[i];
            at.v[i] = position;
          }
        }
      }
    }
    const int64_t p = r * packs_per_row + column;
    reinterpret_cast<P*>(y)[p] = out;
    reinterpret_cast<O*>(offsets)[p] = at;
  }
}

/// Thread t of the backward (plan: rows = batch * height * width, packs of V channels): for each
/// of its input rows (n, h, w) and its V channels, dx = the sum of dy over the outputs whose
/// window covers (h, w) and whose offset points at it, outputs ascending (ph outer, pw inner),
/// accumulated in float from 0 and rounded once; zero where none chose it. Every element is
/// written. As PyTorch's NHWC kernel (max_pool_backward_nhwc), where a single output covers
/// (h, w) its dy is copied, not added to 0 (so a -0.0 gradient stays -0.0).
template <typename T, int V>
TP_HOST_DEVICE inline void max_pool_backward_thread(int64_t t, const ApplyPlan& plan, const PoolGeometry& g,
                                                    const T* __restrict__ dy, const uint8_t* __restrict__ offsets,
                                                    T* __restrict__ dx) {
  using Io = ElementIo<T>;
  using P = Pack<T, V>;
  using O = Pack<uint8_t, V>;
  if (t >= plan.threads) return;
  const int64_t packs_per_row = plan.packs_per_row;
  const ThreadRows walk = thread_rows(t, plan);
  const int64_t column = walk.column;
  for (int64_t r = walk.first; r < walk.end; r += walk.step) {
    const int64_t w = r % g.width;
    const int64_t h = (r / g.width) % g.height;
    const int64_t n = r / g.width / g.height;
    const int64_t ph_begin = pool_first_output(h);
    const int64_t ph_end = pool_output_end(h, g.out_height);
    const int64_t pw_begin = pool_first_output(w);
    const int64_t pw_end = pool_output_end(w, g.out_width);
    P out;
    if (ph_end - ph_begin == 1 && pw_end - pw_begin == 1) {
      const int64_t o = ((n * g.out_height + ph_begin) * g.out_width + pw_begin) * packs_per_row + column;
      const O at = reinterpret_cast<const O*>(offsets)[o];
      const P d = reinterpret_cast<const P*>(dy)[o];
      const int mine =
          static_cast<int>((h - pool_window_start(ph_begin)) * 3 + (w - pool_window_start(pw_begin)));
      TP_UNROLL
      for (int i = 0; i < V; ++i) out.v[i] = at.v[i] == mine ? d.v[i] : Io::from_float(0.0F);
    } else {
      float sum[V];
      TP_UNROLL
      for (int i = 0; i < V; ++i) sum[i] = 0.0F;
      for (int64_t ph = ph_begin; ph < ph_end; ++ph) {
        for (int64_t pw = pw_begin; pw < pw_end; ++pw) {
          const int64_t o = ((n * g.out_height + ph) * g.out_width + pw) * packs_per_row + column;
          const O at = reinterpret_cast<const O*>(offsets)[o];
          const P d = reinterpret_cast<const P*>(dy)[o];
          const int mine = static_cast<int>((h - pool_window_start(ph)) * 3 + (w - pool_window_start(pw)));
          TP_UNROLL
          for (int i = 0; i < V; ++i)
            if (at.v[i] == mine) sum[i] += Io::to_float(d.v[i]);
        }
      }
      TP_UNROLL
      for (int i = 0; i < V; ++i) out.v[i] = Io::from_float(sum[i]);
    }
    reinterpret_cast<P*>(dx)[r * packs_per_row + column] = out;
  }
}

}  // namespace tp::ops
