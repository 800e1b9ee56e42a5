// The fused BatchNorm kernels' per-element arithmetic (framework/src/ops/norm_act_math.h) on the
// CPU, held against LibTorch's own kernels as the oracle: the activations and their gradients
// against at::relu / at::silu / at::hardswish and threshold_backward / silu_backward /
// hardswish_backward, over values that cross every branch (the ReLU's zero, Hardswish's -3 and 3,
// SiLU's saturation, NaN); and the scale and shift against BatchNorm's own formula. The kernels
// call these same functions, so what holds here holds on the GPU up to the device's expf (2 ulp).
#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "ops/norm_act_math.h"

#include <doctest/doctest.h>

namespace {

using tp::ops::Activation;

/// Values on every branch: a dense sweep of [-8, 8] (Hardswish's kinks, ReLU's zero, exactly -3,
/// 0 and 3 among them), SiLU's far tails, signed zeros and NaN.
at::Tensor sample_values() {
  std::vector<float> v;
  for (int i = -1600; i <= 1600; ++i) v.push_back(static_cast<float>(i) / 200.0F);
  for (const float extra : {-100.0F, -40.0F, -20.0F, 20.0F, 40.0F, 100.0F, -0.0F, 1e-30F, -1e-30F,
                            std::nextafter(-3.0F, 0.0F), std::nextafter(3.0F, 4.0F),
                            std::numeric_limits<float>::quiet_NaN()})
    v.push_back(extra);
  return at::tensor(v, at::kFloat);
}

/// The gradients flowing in: varied sign and size.
at::Tensor sample_grads(int64_t n) {
  at::manual_seed(11);
  return at::randn({n}, at::kFloat) * 3.0;
}

template <Activation A>
at::Tensor activate_all(const at::Tensor& v) {
  at::Tensor out = at::empty_like(v);
  const float* in = v.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < v.numel(); ++i) o[i] = tp::ops::activate<A>(in[i]);
  return out;
}

template <Activation A>
at::Tensor input_grad_all(const at::Tensor& v, const at::Tensor& dy) {
  at::Tensor out = at::empty_like(v);
  for (int64_t i = 0; i < v.numel(); ++i)
    out.mutable_data_ptr<float>()[i] =
        tp::ops::activation_input_grad<A>(v.const_data_ptr<float>()[i], dy.const_data_ptr<float>()[i]);
  return out;
}

/// |a - b| <= atol + rtol * |b| everywhere, NaN where the reference has NaN.
void check_close(const at::Tensor& a, const at::Tensor& reference, double rtol, double atol) {
  REQUIRE(a.sizes() == reference.sizes());
  CHECK(at::equal(a.isnan(), reference.isnan()));
  const at::Tensor finite = reference.isfinite();
  const at::Tensor excess = ((a - reference).abs() - (atol + rtol * reference.abs())).masked_select(finite);
  CHECK(excess.max().item<double>() <= 0.0);
}

}  // namespace

TEST_CASE("ReLU: the forward is at::relu's and the mask threshold_backward's, bit for bit, NaN kept") {
  const at::Tensor v = sample_values();
  const at::Tensor dy = sample_grads(v.numel());
  CHECK(at::equal(activate_all<Activation::kRelu>(v).nan_to_num(-1.0), at::relu(v).nan_to_num(-1.0)));
  // Taken at the output as stored (relu_grad's contract): the gradient passes where y > 0 and where y is NaN.
  const at::Tensor y = at::relu(v);
  at::Tensor ours = at::empty_like(v);
  for (int64_t i = 0; i < v.numel(); ++i)
    ours.mutable_data_ptr<float>()[i] = tp::ops::relu_grad(y.const_data_ptr<float>()[i], dy.const_data_ptr<float>()[i]);
  CHECK(at::equal(ours, at::threshold_backward(dy, y, 0)));
}

TEST_CASE("SiLU: the forward and gradient are at::silu's and silu_backward's within float rounding") {
  const at::Tensor v = sample_values();
  const at::Tensor dy = sample_grads(v.numel());
  check_close(activate_all<Activation::kSilu>(v), at::silu(v), 1e-6, 1e-30);
  // Absolute slack too: the derivative crosses zero near v = -1.28, where a rounding of the sigmoid
  // is large relative to the result.
  check_close(input_grad_all<Activation::kSilu>(v, dy), at::silu_backward(dy, v), 1e-6, 1e-6);
}

TEST_CASE("Hardswish: the forward and gradient are at::hardswish's and hardswish_backward's, kinks included") {
  const at::Tensor v = sample_values();
  const at::Tensor dy = sample_grads(v.numel());
  check_close(activate_all<Activation::kHardswish>(v), at::hardswish(v), 1e-6, 1e-30);
  // The gradient's branches (0 below -3, a line up to 3 inclusive, dy above) are exact comparisons,
  // so values at the kinks must land on the same branch as LibTorch's.
  check_close(input_grad_all<Activation::kHardswish>(v, dy), at::hardswish_backward(dy, v), 1e-6, 1e-6);
}

TEST_CASE("none: the identity, its gradient dy") {
  const at::Tensor v = sample_values();
  const at::Tensor dy = sample_grads(v.numel());
  CHECK(at::equal(activate_all<Activation::kNone>(v).nan_to_num(-1.0), v.nan_to_num(-1.0)));
  CHECK(at::equal(input_grad_all<Activation::kNone>(v, dy), dy));
}

TEST_CASE("affine_coefficients: x * scale + shift is BatchNorm's (x - mean) * invstd * weight + bias") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> weight(0.5F, 1.5F), bias(-0.5F, 0.5F), mean(-3.0F, 3.0F),
      invstd(0.2F, 5.0F), x(-10.0F, 10.0F);
  for (int trial = 0; trial < 2000; ++trial) {
    const float w = weight(rng), b = bias(rng), m = mean(rng), s = invstd(rng), xi = x(rng);
    const tp::ops::Affine affine = tp::ops::affine_coefficients(w, b, m, s);
    const double reference = (static_cast<double>(xi) - m) * s * w + b;
    // fmaf as the kernels compute it; scale and shift are each within half an ulp, so the error is
    // a few ulps of the larger of the two terms.
    const double ours = std::fma(xi, affine.scale, affine.shift);
    const double magnitude = std::abs(static_cast<double>(xi) * affine.scale) + std::abs(affine.shift);
    CHECK(std::abs(ours - reference) <= 4.0 * std::numeric_limits<float>::epsilon() * magnitude);
  }
}
