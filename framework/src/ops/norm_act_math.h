// The arithmetic of the fused BatchNorm kernels (norm_act_kernels.cu) that does not depend on the
// GPU: how a channel's row-block partials are shared among the finalize's lanes and combined, the
// per-channel scale and shift, and the activations with their derivatives. Host and device code
// alike: the kernels run it, and CPU tests hold it against references without a GPU
// (tests/unit/ops/norm_act_math_test.cpp: the lanes-then-tree combination against a two-pass mean
// and variance; norm_act_activation_test.cpp: the activations against LibTorch's own CPU kernels).
#pragma once

#include <math.h>
#include <stdint.h>

#include "util/host_device.h"

namespace tp::ops {

/// The activation after BatchNorm [+ residual]. The values are the torchhost::bn_activation_forward
/// / bn_activation_backward ops' `activation` argument, and tp/cpp/fused_norm.h's
/// tp::cpp::NormActivation (the SDK cannot include this header): never renumber them.
enum class Activation : int32_t {
  kRelu = 0,       ///< max(v, 0), NaN kept (as at::relu)
  kNone = 1,       ///< v: BatchNorm alone
  kSilu = 2,       ///< v * sigmoid(v) (at::silu)
  kHardswish = 3,  ///< v * clamp(v + 3, 0, 6) / 6 (at::hardswish)
};

/// The activation of `v` in fp32, as LibTorch's CUDA kernels compute it in their fp32 arithmetic
/// (aten/src/ATen/native/cuda/ActivationSiluKernel.cu, ActivationHardswishKernel.cu).
template <Activation A>
TP_HOST_DEVICE inline float activate(float v) {
  if constexpr (A == Activation::kRelu) return v < 0.0F ? 0.0F : v;
  if constexpr (A == Activation::kSilu) return v / (1.0F + expf(-v));
  if constexpr (A == Activation::kHardswish) return v * fminf(fmaxf(v + 3.0F, 0.0F), 6.0F) / 6.0F;
  return v;
}

/// d act / d v at the activation's input `v`, times `dy` (silu_backward's and hardswish_backward's
/// formulas). ReLU's gradient is not taken here: its mask is the rounded output's (relu_grad).
template <Activation A>
TP_HOST_DEVICE inline float activation_input_grad(float v, float dy) {
  if constexpr (A == Activation::kSilu) {
    const float sigmoid = 1.0F / (1.0F + expf(-v));
    return dy * sigmoid * (1.0F + v * (1.0F - sigmoid));
  }
  if constexpr (A == Activation::kHardswish) {
    // LibTorch's branches, kinks included: 0 at v = -3 and dy at v = 3 (NaN takes dy).
    if (v <= -3.0F) return 0.0F;
    if (v < 3.0F) return dy * (v / 3.0F + 0.5F);
    return dy;
  }
  return dy;
}

/// ReLU's backward at the forward's output `y` as stored (rounded to its type): threshold_backward's
/// rule, the gradient passes where y > 0 and where y is NaN.
TP_HOST_DEVICE inline float relu_grad(float y, float dy) { return y <= 0.0F ? 0.0F : dy; }

/// A channel's y = x * scale + shift (before the activation).
struct Affine {
  float scale, shift;
};

/// scale = weight * invstd, shift = bias - mean * scale, from the saved (float) statistics, in
/// double with an explicit fma, so every kernel that calls it gets the same bits: the forward's
/// apply and the backward that recomputes the activation's input from x (its ReLU mask then equals
/// the forward's output > 0 exactly).
TP_HOST_DEVICE inline Affine affine_coefficients(float weight, float bias, float mean, float invstd) {
  const double scale = static_cast<double>(weight) * static_cast<double>(invstd);
  return {static_cast<float>(scale), static_cast<float>(fma(-static_cast<double>(mean), scale, static_cast<double>(bias)))};
}

/// blockDim.y of the finalizes: a channel's up to ~500 partials combined by 16 lanes, not one
/// thread walking them all (a serial walk was latency-bound: 4.8 ms of ResNet-50's step on an H200).
inline constexpr int kFinalizeLanes = 16;

/// A combination of row blocks of one channel: count, mean and M2 (sum of squared deviations).
struct Moments {
  double n, mean, m2;
};

/// `a` and a block of nb rows with mean `mean_b` and M2 `m2_b` combined (Chan et al.'s pairwise
/// update); either may be empty.
TP_HOST_DEVICE inline Moments combine(const Moments& a, double nb, double mean_b, double m2_b) {
  const double total = a.n + nb;
  if (nb == 0.0) return a;
  const double delta = mean_b - a.mean;
  return {total, a.mean + delta * (nb / total), a.m2 + m2_b + delta * delta * (a.n * nb / total)};
}

/// The row blocks [begin, end) whose partials lane `lane` combines: a contiguous share, in order;
/// together the lanes cover [0, row_blocks) once.
struct BlockShare {
  int64_t begin, end;
};
TP_HOST_DEVICE inline BlockShare lane_share(int32_t row_blocks, int lane) {
  const int64_t per = (row_blocks + kFinalizeLanes - 1) / kFinalizeLanes;
  const int64_t begin = lane * per < row_blocks ? lane * per : row_blocks;
  return {begin, begin + per < row_blocks ? begin + per : row_blocks};
}

/// The rows of row block `b`: [b * rows_per_block, ...) clipped at `rows`.
TP_HOST_DEVICE inline int64_t block_row_count(int64_t b, int64_t rows_per_block, int64_t rows) {
  const int64_t begin = b * rows_per_block;
  return (begin + rows_per_block < rows ? begin + rows_per_block : rows) - begin;
}

}  // namespace tp::ops
