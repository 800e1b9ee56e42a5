// The fused max pool's per-thread work (framework/src/ops/pool_passes.h) run on the CPU: every
// thread of a launch, in turn, through the same thread functions the CUDA kernels call
// (pool_kernels.cu), with LibTorch's bfloat16 and half in place of CUDA's, held against LibTorch's
// own CPU kernels on a channels-last input:
// - forward against at::max_pool2d_with_indices: y bit for bit (NaN where it has NaN), and the
//   index each offset implies ((oh*2-1 + offset/3) * W + ow*2-1 + offset%3) equal to its index;
// - backward against at::max_pool2d_with_indices_backward with those indices: dx bit for bit, every
//   element written (dx starts as all-ones bits, a NaN no pass writes).
// Inputs are drawn from a few small integers, +-0.0, -inf and NaN, so windows hold ties (equal
// values, and 0.0 against -0.0, whose bits tell which was taken) and NaNs. Gradients: small
// integers (|dy| <= 8; at most 4 outputs choose an input, so every partial sum is an integer of at
// most 32, exact in float, bfloat16 and half alike): the comparison is exact in every dtype even
// though LibTorch's CPU backward adds in the element type (rounding each add in bfloat16/half) where
// the kernels add in float and round once. For float32 also normal-distributed gradients, still bit
// for bit: both sum the same terms in the same order (outputs ascending) in float from 0.
// Shapes: odd and even H and W, H = 1, W = 2, H = W = 1; C = 64, 24 and 3 at every pack width that
// divides C; more threads than rows, and fewer (a thread strides over rows).
#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "ops/pool_passes.h"

#include "c10_element_io.h"
#include "cpu_launch.h"

#include <doctest/doctest.h>

// Named, not anonymous: TP_UNITY compiles this file with norm_act_passes_test.cpp, whose anonymous
// namespace has helpers of the same names.
namespace pool_test {

using tp::ops::ApplyPlan;
using tp::ops::ElementIo;
using tp::ops::PoolGeometry;

using tp::ops_test::run_launch;
using tp::ops_test::same_bits;
using tp::ops_test::sentinel;

struct PoolCase {
  int64_t n, c, h, w, max_threads;
};

const PoolCase kCases[] = {
    {2, 64, 7, 9, 100000},  // odd H and W; more threads wanted than rows
    {2, 64, 8, 6, 256},     // even; a thread strides over several rows
    {3, 24, 1, 5, 40},      // H = 1: one output row, windows clipped above and below
    {2, 24, 4, 2, 7},       // W = 2: fewer threads wanted than one row's packs
    {1, 3, 5, 5, 1},        // C = 3: one channel a pack
    {2, 3, 1, 2, 100000},   // H = 1 and W = 2
    {1, 64, 1, 1, 64},      // H = W = 1: one window of one element
    {1, 24, 13, 11, 100},
};

/// Values with ties and NaNs: mostly integers in [-2, 2], some -0.0, -inf and NaN.
template <typename T>
std::vector<T> pool_input(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<T> out(n);
  for (T& v : out) {
    const int p = pick(rng);
    float f = static_cast<float>(p % 5 - 2);
    if (p >= 85) f = -0.0F;
    if (p >= 92) f = -std::numeric_limits<float>::infinity();
    if (p >= 96) f = std::numeric_limits<float>::quiet_NaN();
    v = ElementIo<T>::from_float(f);
  }
  return out;
}

template <typename T>
std::vector<T> integer_grads(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> value(-8, 8);
  std::vector<T> out(n);
  for (T& v : out) v = ElementIo<T>::from_float(static_cast<float>(value(rng)));
  return out;
}

template <typename T>
std::vector<T> normal_grads(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> value(0.0F, 1.0F);
  std::vector<T> out(n);
  for (T& v : out) v = ElementIo<T>::from_float(value(rng));
  return out;
}

/// An NHWC buffer seen as the [N, C, H, W] channels-last tensor it is (no copy).
template <typename T>
at::Tensor channels_last_view(std::vector<T>& data, int64_t n, int64_t c, int64_t h, int64_t w) {
  return at::from_blob(data.data(), {n, h, w, c}, at::TensorOptions().dtype(c10::CppTypeToScalarType<T>::value))
      .permute({0, 3, 1, 2});
}

/// A channels-last [N, C, H, W] tensor's elements in NHWC order.
template <typename T>
std::vector<T> nhwc_elements(const at::Tensor& t) {
  const at::Tensor rows = t.permute({0, 2, 3, 1}).contiguous();
  const T* p = rows.const_data_ptr<T>();
  return std::vector<T>(p, p + rows.numel());
}

template <typename T, int V>
void check_case(const PoolCase& s, std::mt19937& rng) {
  CAPTURE(s.n);
  CAPTURE(s.c);
  CAPTURE(s.h);
  CAPTURE(s.w);
  CAPTURE(V);
  using Io = ElementIo<T>;
  PoolGeometry g;
  g.batch = s.n;
  g.height = s.h;
  g.width = s.w;
  g.out_height = tp::ops::max_pool3x3s2_output_size(s.h);
  g.out_width = tp::ops::max_pool3x3s2_output_size(s.w);
  const auto in_elements = static_cast<size_t>(s.n * s.h * s.w * s.c);
  const auto out_elements = static_cast<size_t>(s.n * g.out_height * g.out_width * s.c);

  // 1. Forward, every thread of the launch.
  std::vector<T> x = pool_input<T>(in_elements, rng);
  std::vector<T> y(out_elements, sentinel<T>());
  std::vector<uint8_t> offsets(out_elements, 0xFF);
  const ApplyPlan forward_plan = tp::ops::plan_apply(s.n * g.out_height * g.out_width, s.c, V, s.max_threads);
  run_launch(forward_plan, [&](int64_t t) {
    tp::ops::max_pool_forward_thread<T, V>(t, forward_plan, g, x.data(), y.data(), offsets.data());
  });

  // 2. LibTorch's forward on the same channels-last input.
  const at::Tensor xt = channels_last_view(x, s.n, s.c, s.h, s.w);
  REQUIRE(xt.is_contiguous(at::MemoryFormat::ChannelsLast));
  const auto [ref_y, ref_indices] = at::max_pool2d_with_indices(xt, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false);
  REQUIRE(ref_y.size(2) == g.out_height);
  REQUIRE(ref_y.size(3) == g.out_width);
  const std::vector<T> expected_y = nhwc_elements<T>(ref_y);
  const std::vector<int64_t> expected_index = nhwc_elements<int64_t>(ref_indices);
  size_t wrong_y = 0, wrong_index = 0, nans = 0;
  for (int64_t r = 0; r < s.n * g.out_height * g.out_width; ++r) {
    const int64_t ow = r % g.out_width;
    const int64_t oh = (r / g.out_width) % g.out_height;
    for (int64_t c = 0; c < s.c; ++c) {
      const auto i = static_cast<size_t>(r * s.c + c);
      const bool both_nan = std::isnan(Io::to_float(y[i])) && std::isnan(Io::to_float(expected_y[i]));
      nans += both_nan ? 1 : 0;
      wrong_y += both_nan || same_bits(y[i], expected_y[i]) ? 0 : 1;
      const int64_t h = oh * 2 - 1 + offsets[i] / 3;
      const int64_t w = ow * 2 - 1 + offsets[i] % 3;
      const bool inside = offsets[i] <= 8 && h >= 0 && h < s.h && w >= 0 && w < s.w;
      wrong_index += inside && h * s.w + w == expected_index[i] ? 0 : 1;
    }
  }
  CHECK(wrong_y == 0);
  CHECK(wrong_index == 0);
  if (out_elements >= 100) CHECK(nans > 0);  // the NaN rule was exercised (4% of inputs are NaN)

  // 3. Backward with the kernels' offsets against LibTorch's with its indices, for each gradient.
  const bool is_float = std::is_same_v<T, float>;
  for (const bool integers : {true, false}) {
    if (!integers && !is_float) continue;
    CAPTURE(integers);
    std::vector<T> dy = integers ? integer_grads<T>(out_elements, rng) : normal_grads<T>(out_elements, rng);
    std::vector<T> dx(in_elements, sentinel<T>());
    const ApplyPlan backward_plan = tp::ops::plan_apply(s.n * s.h * s.w, s.c, V, s.max_threads);
    run_launch(backward_plan, [&](int64_t t) {
      tp::ops::max_pool_backward_thread<T, V>(t, backward_plan, g, dy.data(), offsets.data(), dx.data());
    });
    const at::Tensor dyt = channels_last_view(dy, s.n, s.c, g.out_height, g.out_width);
    const at::Tensor ref_dx =
        at::max_pool2d_with_indices_backward(dyt, xt, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, ref_indices);
    const std::vector<T> expected_dx = nhwc_elements<T>(ref_dx);
    size_t wrong_dx = 0;
    for (size_t i = 0; i < in_elements; ++i) wrong_dx += same_bits(dx[i], expected_dx[i]) ? 0 : 1;
    CHECK(wrong_dx == 0);
  }
}

template <typename T, int V>
void check_width(std::mt19937& rng) {
  for (const PoolCase& s : kCases)
    if (s.c % V == 0) check_case<T, V>(s, rng);
}

}  // namespace pool_test

using pool_test::check_width;

TEST_CASE("max_pool3x3s2_output_size and the covering outputs are PyTorch's (kernel 3, stride 2, padding 1)") {
  for (int64_t size = 1; size <= 40; ++size) {
    CAPTURE(size);
    const int64_t out = tp::ops::max_pool3x3s2_output_size(size);
    CHECK(out == (size + 2 - 3) / 2 + 1);
    for (int64_t i = 0; i < size; ++i) {
      // Outputs o with o*2-1 <= i <= o*2+1, every one of them and no other, ascending.
      int64_t first = -1, end = -1;
      for (int64_t o = 0; o < out; ++o)
        if (o * 2 - 1 <= i && i <= o * 2 + 1) {
          if (first < 0) first = o;
          end = o + 1;
        }
      CHECK(tp::ops::pool_first_output(i) == first);
      CHECK(tp::ops::pool_output_end(i, out) == end);
    }
  }
}

TEST_CASE("the max pool passes match LibTorch's CPU kernels bit for bit: values, indices, ties, NaN, gradients") {
  std::mt19937 rng(20261128);
  check_width<float, 1>(rng);
  check_width<float, 2>(rng);
  check_width<float, 4>(rng);
  check_width<c10::BFloat16, 1>(rng);
  check_width<c10::BFloat16, 2>(rng);
  check_width<c10::BFloat16, 4>(rng);
  check_width<c10::BFloat16, 8>(rng);
  check_width<c10::Half, 1>(rng);
  check_width<c10::Half, 8>(rng);
}
