// The fused BatchNorm kernels' per-thread work (framework/src/ops/norm_act_passes.h) run on the
// CPU: every thread of a launch, in turn, through the same thread functions the CUDA kernels call,
// with LibTorch's bfloat16 and half in place of CUDA's (both round to nearest even).
// - The elementwise passes against a direct per-element computation: every element written
//   exactly once, with its own channel's coefficients, bit for bit.
// - The reductions' accumulation, each block's lanes then summed in the kernels' tree order:
//   on integer data the sums are exact, so every row of a row block is counted once per channel
//   with the right channel's values (equality); on random data the statistics and the activations'
//   gradient sums against a double-precision reference.
// Shapes where a thread strides over many rows, where there are more threads than rows, channel
// counts that are not a power of two (EfficientNet's 24, 40, 112), and every pack width,
// activation and gradient source the kernels are built for.
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ops/norm_act_passes.h"

#include "c10_element_io.h"
#include "cpu_launch.h"

#include <doctest/doctest.h>

namespace {

using tp::ops::Activation;
using tp::ops::ApplyPlan;
using tp::ops::ElementIo;

using tp::ops_test::run_launch;
using tp::ops_test::same_bits;
using tp::ops_test::sentinel;

struct Shape {
  int64_t rows, channels, max_threads;
};

/// Rows of many lengths relative to the thread count, and channel counts ResNet, EfficientNet and
/// MobileNetV3 have.
const Shape kShapes[] = {
    {50, 64, 100000},  // more threads wanted than rows: one row each
    {50, 64, 256},     // a thread strides over 16 or so rows
    {37, 24, 40},      // 40 threads wanted for 3 packs per row: 13 rows of threads
    {9, 112, 1},       // fewer threads wanted than one row: one row's worth
    {16, 2048, 2048},
    {3, 40, 7},
};

template <typename T>
std::vector<T> random_elements(size_t n, std::mt19937& rng, float spread) {
  std::normal_distribution<float> value(0.0F, spread);
  std::vector<T> out(n);
  for (T& v : out) v = ElementIo<T>::from_float(value(rng));
  return out;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> value(lo, hi);
  std::vector<float> out(n);
  for (float& v : out) v = value(rng);
  return out;
}

template <typename T, int V, bool kResidual, Activation A>
void check_forward(const Shape& shape, std::mt19937& rng) {
  CAPTURE(V);
  CAPTURE(kResidual);
  CAPTURE(static_cast<int>(A));
  using Io = ElementIo<T>;
  const auto n = static_cast<size_t>(shape.rows * shape.channels);
  const std::vector<T> x = random_elements<T>(n, rng, 2.0F);
  const std::vector<T> residual = random_elements<T>(n, rng, 1.0F);
  const std::vector<float> scale = random_floats(static_cast<size_t>(shape.channels), rng, 0.2F, 3.0F);
  const std::vector<float> shift = random_floats(static_cast<size_t>(shape.channels), rng, -1.0F, 1.0F);
  std::vector<T> y(n, sentinel<T>());
  const ApplyPlan plan = tp::ops::plan_apply(shape.rows, shape.channels, V, shape.max_threads);
  REQUIRE(plan.threads % plan.packs_per_row == 0);
  run_launch(plan, [&](int64_t t) {
    tp::ops::forward_apply_thread<T, V, kResidual, A>(t, plan, x.data(), kResidual ? residual.data() : nullptr,
                                                      y.data(), scale.data(), shift.data());
  });
  size_t wrong = 0;
  for (int64_t m = 0; m < shape.rows; ++m)
    for (int64_t c = 0; c < shape.channels; ++c) {
      const auto i = static_cast<size_t>(m * shape.channels + c);
      float v = std::fma(Io::to_float(x[i]), scale[static_cast<size_t>(c)], shift[static_cast<size_t>(c)]);
      if (kResidual) v += Io::to_float(residual[i]);
      wrong += same_bits(y[i], Io::from_float(tp::ops::activate<A>(v))) ? 0 : 1;
    }
  CHECK(wrong == 0);
}

template <typename T, int V, bool kResidual, Activation A, bool kFromX>
void check_backward(const Shape& shape, std::mt19937& rng) {
  CAPTURE(V);
  CAPTURE(kResidual);
  CAPTURE(static_cast<int>(A));
  CAPTURE(kFromX);
  using Io = ElementIo<T>;
  const auto n = static_cast<size_t>(shape.rows * shape.channels);
  const auto channels = static_cast<size_t>(shape.channels);
  const std::vector<T> dy = random_elements<T>(n, rng, 1.0F);
  const std::vector<T> x = random_elements<T>(n, rng, 2.0F);
  const std::vector<T> y = random_elements<T>(n, rng, 1.0F);  // only its sign matters (ReLU's stored mask)
  const std::vector<float> a = random_floats(channels, rng, 0.2F, 3.0F), b = random_floats(channels, rng, -0.5F, 0.5F),
                           k = random_floats(channels, rng, -0.5F, 0.5F), mean = random_floats(channels, rng, -1.0F, 1.0F),
                           scale = random_floats(channels, rng, 0.2F, 3.0F), shift = random_floats(channels, rng, -1.0F, 1.0F);
  const tp::ops::BackwardCoefficients coef{a.data(), b.data(), k.data(), mean.data(),
                                           kFromX ? scale.data() : nullptr, kFromX ? shift.data() : nullptr};
  std::vector<T> dx(n, sentinel<T>()), d_residual(n, sentinel<T>());
  const ApplyPlan plan = tp::ops::plan_apply(shape.rows, shape.channels, V, shape.max_threads);
  run_launch(plan, [&](int64_t t) {
    tp::ops::backward_apply_thread<T, V, kResidual, A, kFromX>(t, plan, dy.data(), x.data(),
                                                               A == Activation::kRelu && !kFromX ? y.data() : nullptr,
                                                               coef, dx.data(), kResidual ? d_residual.data() : nullptr);
  });
  size_t wrong = 0;
  for (int64_t m = 0; m < shape.rows; ++m)
    for (int64_t c = 0; c < shape.channels; ++c) {
      const auto i = static_cast<size_t>(m * shape.channels + c);
      const auto ch = static_cast<size_t>(c);
      const float xi = Io::to_float(x[i]);
      const float d = Io::to_float(dy[i]);
      float g = d;
      if (A == Activation::kRelu && !kFromX) {
        g = tp::ops::relu_grad(Io::to_float(y[i]), d);
      } else if (kFromX) {
        const float v = std::fma(xi, scale[ch], shift[ch]);
        g = A == Activation::kRelu ? tp::ops::relu_grad(Io::to_float(Io::from_float(tp::ops::activate<A>(v))), d)
                                   : tp::ops::activation_input_grad<A>(v, d);
      }
      wrong += same_bits(dx[i], Io::from_float(a[ch] * (g - b[ch] - (xi - mean[ch]) * k[ch]))) ? 0 : 1;
      if (kResidual) wrong += same_bits(d_residual[i], Io::from_float(g)) ? 0 : 1;
    }
  CHECK(wrong == 0);
  if (!kResidual) CHECK(same_bits(d_residual[0], sentinel<T>()));  // never written without a residual
}

/// Every combination the kernels instantiate, at pack width V.
template <typename T, int V>
void check_all(const Shape& shape, std::mt19937& rng) {
  if (shape.channels % V != 0) return;
  check_forward<T, V, false, Activation::kRelu>(shape, rng);
  check_forward<T, V, true, Activation::kRelu>(shape, rng);
  check_forward<T, V, false, Activation::kNone>(shape, rng);
  check_forward<T, V, false, Activation::kSilu>(shape, rng);
  check_forward<T, V, false, Activation::kHardswish>(shape, rng);
  check_backward<T, V, false, Activation::kRelu, false>(shape, rng);
  check_backward<T, V, true, Activation::kRelu, false>(shape, rng);
  check_backward<T, V, false, Activation::kRelu, true>(shape, rng);
  check_backward<T, V, false, Activation::kNone, false>(shape, rng);
  check_backward<T, V, false, Activation::kSilu, true>(shape, rng);
  check_backward<T, V, false, Activation::kHardswish, true>(shape, rng);
}

}  // namespace

/// What a reduction launch leaves per (row block, channel): the two totals over the block's rows
/// (for the statistics: the sums of d and d^2 and the shift), as the kernels form them: each
/// thread's sums, then the lanes added in the tree's order.
struct ReductionTotals {
  std::vector<float> a, b, shift;  // [row_blocks * channels]
  std::vector<int> written;        // how many threads wrote each entry
};

/// Runs every block of a reduction launch over `rows` x `channels` with `rows_per_block` rows a
/// block; `sums(row_block, pack_column, lane, lanes, a, b, shift)` is the thread function.
template <int V, typename Sums>
ReductionTotals run_reduction(int64_t rows, int64_t channels, int64_t rows_per_block, Sums sums) {
  const int64_t packs_per_row = channels / V;
  const tp::ops::ReductionTile tile = tp::ops::reduction_tile(packs_per_row);
  const int64_t row_blocks = (rows + rows_per_block - 1) / rows_per_block;
  const int64_t column_tiles = (packs_per_row + tile.packs_x - 1) / tile.packs_x;
  const auto entries = static_cast<size_t>(row_blocks * channels);
  ReductionTotals totals{std::vector<float>(entries, 0.0F), std::vector<float>(entries, 0.0F),
                         std::vector<float>(entries, 0.0F), std::vector<int>(entries, 0)};
  for (int64_t rb = 0; rb < row_blocks; ++rb)
    for (int64_t ct = 0; ct < column_tiles; ++ct)
      for (int tx = 0; tx < tile.packs_x; ++tx) {
        const int64_t column = ct * tile.packs_x + tx;
        std::vector<std::array<float, V>> a(static_cast<size_t>(tile.lanes)), b(a.size()), shift(a.size());
        bool active = false;
        for (int ty = 0; ty < tile.lanes; ++ty) {
          float ra[V], rb_[V], rs[V];
          active = sums(rb, column, ty, tile.lanes, ra, rb_, rs);
          for (int i = 0; i < V; ++i) {
            a[static_cast<size_t>(ty)][static_cast<size_t>(i)] = ra[i];
            b[static_cast<size_t>(ty)][static_cast<size_t>(i)] = rb_[i];
            shift[static_cast<size_t>(ty)][static_cast<size_t>(i)] = rs[i];
          }
        }
        for (int stride = tile.lanes / 2; stride > 0; stride /= 2)
          for (int ty = 0; ty < stride; ++ty)
            for (int i = 0; i < V; ++i) {
              a[static_cast<size_t>(ty)][static_cast<size_t>(i)] += a[static_cast<size_t>(ty + stride)][static_cast<size_t>(i)];
              b[static_cast<size_t>(ty)][static_cast<size_t>(i)] += b[static_cast<size_t>(ty + stride)][static_cast<size_t>(i)];
            }
        if (!active) continue;
        for (int i = 0; i < V; ++i) {
          const auto at = static_cast<size_t>(rb * channels + column * V + i);
          totals.a[at] = a[0][static_cast<size_t>(i)];
          totals.b[at] = b[0][static_cast<size_t>(i)];
          totals.shift[at] = shift[0][static_cast<size_t>(i)];
          ++totals.written[at];
        }
      }
  return totals;
}

struct ReductionShape {
  int64_t rows, channels, rows_per_block;
};

const ReductionShape kReductionShapes[] = {
    {200, 64, 64},    // 8 packs of bfloat16 a row: 8 columns by 32 lanes
    {1000, 24, 97},   // 3 packs: 3 columns by 64 lanes, a short last block
    {130, 2048, 64},  // 256 packs: 8 column tiles of 32
    {5, 112, 64},     // fewer rows than lanes
    {300, 40, 300},   // one row block
};

template <typename T, int V>
void check_reduction_coverage(const ReductionShape& shape) {
  CAPTURE(V);
  using Io = ElementIo<T>;
  // Small integers: every sum below is exact in float, so any row counted twice, missed, or taken
  // from another channel changes a total.
  const auto n = static_cast<size_t>(shape.rows * shape.channels);
  std::vector<T> dy(n), x(n);
  for (size_t i = 0; i < n; ++i) {
    dy[i] = Io::from_float(static_cast<float>(static_cast<int>(i % 7) - 3));
    x[i] = Io::from_float(static_cast<float>(static_cast<int>((i * 5) % 11) - 5));
  }
  const std::vector<float> zero_mean(static_cast<size_t>(shape.channels), 0.0F);
  const int64_t packs_per_row = shape.channels / V;
  const ReductionTotals totals = run_reduction<V>(
      shape.rows, shape.channels, shape.rows_per_block,
      [&](int64_t rb, int64_t column, int lane, int lanes, float (&a)[V], float (&b)[V], float (&shift)[V]) {
        for (float& v : shift) v = 0.0F;
        return tp::ops::backward_thread_sums<T, V, Activation::kNone, false>(
            dy.data(), x.data(), nullptr, nullptr, nullptr, zero_mean.data(), nullptr, shape.rows, packs_per_row,
            shape.rows_per_block, rb, column, lane, lanes, a, b);
      });
  size_t wrong = 0;
  for (int64_t rb = 0; rb * shape.rows_per_block < shape.rows; ++rb)
    for (int64_t c = 0; c < shape.channels; ++c) {
      double g = 0.0, gx = 0.0;
      for (int64_t r = rb * shape.rows_per_block; r < std::min(shape.rows, (rb + 1) * shape.rows_per_block); ++r) {
        const auto i = static_cast<size_t>(r * shape.channels + c);
        g += Io::to_float(dy[i]);
        gx += static_cast<double>(Io::to_float(dy[i])) * Io::to_float(x[i]);
      }
      const auto at = static_cast<size_t>(rb * shape.channels + c);
      wrong += totals.written[at] == 1 && totals.a[at] == g && totals.b[at] == gx ? 0 : 1;
    }
  CHECK(wrong == 0);
}

template <typename T, int V>
void check_statistics(const ReductionShape& shape, std::mt19937& rng) {
  CAPTURE(V);
  using Io = ElementIo<T>;
  const auto n = static_cast<size_t>(shape.rows * shape.channels);
  std::vector<T> x(n);
  std::normal_distribution<float> value(3.0F, 2.0F);  // an offset mean: the shift matters
  for (T& v : x) v = Io::from_float(value(rng));
  const int64_t packs_per_row = shape.channels / V;
  const ReductionTotals totals = run_reduction<V>(
      shape.rows, shape.channels, shape.rows_per_block,
      [&](int64_t rb, int64_t column, int lane, int lanes, float (&a)[V], float (&b)[V], float (&shift)[V]) {
        return tp::ops::stats_thread_sums<T, V>(x.data(), shape.rows, packs_per_row, shape.rows_per_block, rb, column,
                                                lane, lanes, shift, a, b);
      });
  size_t wrong = 0;
  for (int64_t rb = 0; rb * shape.rows_per_block < shape.rows; ++rb)
    for (int64_t c = 0; c < shape.channels; ++c) {
      const int64_t begin = rb * shape.rows_per_block, end = std::min(shape.rows, begin + shape.rows_per_block);
      double mean = 0.0;
      for (int64_t r = begin; r < end; ++r) mean += Io::to_float(x[static_cast<size_t>(r * shape.channels + c)]);
      mean /= static_cast<double>(end - begin);
      double m2 = 0.0;
      for (int64_t r = begin; r < end; ++r) {
        const double d = Io::to_float(x[static_cast<size_t>(r * shape.channels + c)]) - mean;
        m2 += d * d;
      }
      const auto at = static_cast<size_t>(rb * shape.channels + c);
      const tp::ops::StatsPartial p = tp::ops::stats_partial(totals.shift[at], totals.a[at], totals.b[at], end - begin);
      const bool shift_is_first = totals.shift[at] == Io::to_float(x[static_cast<size_t>(begin * shape.channels + c)]);
      const bool close = std::abs(p.mean - mean) <= 1e-5 * (1.0 + std::abs(mean)) &&
                         std::abs(p.m2 - m2) <= 1e-4 * (1.0 + m2);
      wrong += totals.written[at] == 1 && shift_is_first && close ? 0 : 1;
    }
  CHECK(wrong == 0);
}

template <typename T, int V, Activation A, bool kFromX>
void check_gradient_sums(const ReductionShape& shape, std::mt19937& rng) {
  CAPTURE(V);
  CAPTURE(static_cast<int>(A));
  CAPTURE(kFromX);
  using Io = ElementIo<T>;
  const auto n = static_cast<size_t>(shape.rows * shape.channels);
  const auto channels = static_cast<size_t>(shape.channels);
  const std::vector<T> dy = random_elements<T>(n, rng, 1.0F), x = random_elements<T>(n, rng, 2.0F),
                       y = random_elements<T>(n, rng, 1.0F);
  const std::vector<float> weight = random_floats(channels, rng, 0.5F, 1.5F), bias = random_floats(channels, rng, -0.5F, 0.5F),
                           mean = random_floats(channels, rng, -0.3F, 0.3F), invstd = random_floats(channels, rng, 0.3F, 2.0F);
  const int64_t packs_per_row = shape.channels / V;
  const ReductionTotals totals = run_reduction<V>(
      shape.rows, shape.channels, shape.rows_per_block,
      [&](int64_t rb, int64_t column, int lane, int lanes, float (&a)[V], float (&b)[V], float (&shift)[V]) {
        for (float& v : shift) v = 0.0F;
        return tp::ops::backward_thread_sums<T, V, A, kFromX>(
            dy.data(), x.data(), A == Activation::kRelu && !kFromX ? y.data() : nullptr, weight.data(),
            kFromX ? bias.data() : nullptr, mean.data(), invstd.data(), shape.rows, packs_per_row,
            shape.rows_per_block, rb, column, lane, lanes, a, b);
      });
  size_t wrong = 0;
  for (int64_t rb = 0; rb * shape.rows_per_block < shape.rows; ++rb)
    for (int64_t c = 0; c < shape.channels; ++c) {
      const auto ch = static_cast<size_t>(c);
      const tp::ops::Affine affine = tp::ops::affine_coefficients(weight[ch], bias[ch], mean[ch], invstd[ch]);
      double g_sum = 0.0, gx_sum = 0.0, scale = 0.0;
      for (int64_t r = rb * shape.rows_per_block; r < std::min(shape.rows, (rb + 1) * shape.rows_per_block); ++r) {
        const auto i = static_cast<size_t>(r * shape.channels + c);
        const float xi = Io::to_float(x[i]), d = Io::to_float(dy[i]);
        float g = d;
        if (A == Activation::kRelu && !kFromX) {
          g = tp::ops::relu_grad(Io::to_float(y[i]), d);
        } else if (kFromX) {
          const float v = std::fma(xi, affine.scale, affine.shift);
          g = A == Activation::kRelu ? tp::ops::relu_grad(Io::to_float(Io::from_float(tp::ops::activate<A>(v))), d)
                                     : tp::ops::activation_input_grad<A>(v, d);
        }
        g_sum += g;
        gx_sum += static_cast<double>(g) * (xi - mean[ch]);
        scale += std::abs(g) * (1.0 + std::abs(xi - mean[ch]));
      }
      const auto at = static_cast<size_t>(rb * shape.channels + c);
      // Float sums of up to ~100 terms in another order: within 1e-5 of the terms' total size.
      const bool close = std::abs(totals.a[at] - g_sum) <= 1e-5 * (1.0 + scale) &&
                         std::abs(totals.b[at] - gx_sum) <= 1e-5 * (1.0 + scale);
      wrong += totals.written[at] == 1 && close ? 0 : 1;
    }
  CHECK(wrong == 0);
}

template <typename T, int V>
void check_reductions(const ReductionShape& shape, std::mt19937& rng) {
  if (shape.channels % V != 0) return;
  check_reduction_coverage<T, V>(shape);
  check_statistics<T, V>(shape, rng);
  check_gradient_sums<T, V, Activation::kRelu, false>(shape, rng);
  check_gradient_sums<T, V, Activation::kRelu, true>(shape, rng);
  check_gradient_sums<T, V, Activation::kNone, false>(shape, rng);
  check_gradient_sums<T, V, Activation::kSilu, true>(shape, rng);
  check_gradient_sums<T, V, Activation::kHardswish, true>(shape, rng);
}

TEST_CASE("reduction_tile: at most 256 threads, lanes a power of two, no more columns than a row has") {
  for (int64_t packs = 1; packs <= 600; ++packs) {
    CAPTURE(packs);
    const tp::ops::ReductionTile tile = tp::ops::reduction_tile(packs);
    CHECK(tile.packs_x >= 1);
    CHECK(tile.packs_x <= std::min<int64_t>(packs, 32));
    CHECK(tile.lanes * tile.packs_x <= tp::ops::kReductionThreads);
    CHECK(tile.lanes * tile.packs_x * 2 > tp::ops::kReductionThreads);  // no power of two left unused
    CHECK((tile.lanes & (tile.lanes - 1)) == 0);
  }
}

TEST_CASE("the reductions count every row of a row block once per channel, and sum what the kernels must") {
  std::mt19937 rng(23);
  for (const ReductionShape& shape : kReductionShapes) {
    CAPTURE(shape.rows);
    CAPTURE(shape.channels);
    CAPTURE(shape.rows_per_block);
    check_reductions<float, 4>(shape, rng);
    check_reductions<float, 1>(shape, rng);
    check_reductions<c10::BFloat16, 8>(shape, rng);
    check_reductions<c10::BFloat16, 2>(shape, rng);
    check_reductions<c10::Half, 8>(shape, rng);
  }
}

TEST_CASE("plan_apply: whole rows of threads, at least one row, at most the rows there are") {
  for (const Shape& s : kShapes) {
    CAPTURE(s.rows);
    CAPTURE(s.channels);
    const ApplyPlan plan = tp::ops::plan_apply(s.rows, s.channels, 8, s.max_threads);
    CHECK(plan.packs_per_row == s.channels / 8);
    CHECK(plan.packs == s.rows * s.channels / 8);
    CHECK(plan.threads % plan.packs_per_row == 0);
    CHECK(plan.threads >= plan.packs_per_row);
    CHECK(plan.threads <= plan.packs);
    if (s.max_threads >= plan.packs_per_row) CHECK(plan.threads <= s.max_threads);
  }
}

TEST_CASE("the forward and backward passes write every element once with its channel's coefficients") {
  std::mt19937 rng(17);
  for (const Shape& shape : kShapes) {
    CAPTURE(shape.rows);
    CAPTURE(shape.channels);
    CAPTURE(shape.max_threads);
    check_all<float, 4>(shape, rng);
    check_all<float, 2>(shape, rng);
    check_all<float, 1>(shape, rng);
    check_all<c10::BFloat16, 8>(shape, rng);
    check_all<c10::BFloat16, 1>(shape, rng);
    check_all<c10::Half, 8>(shape, rng);
    check_all<c10::Half, 4>(shape, rng);
  }
}
