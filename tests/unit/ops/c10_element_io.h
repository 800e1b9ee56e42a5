// ElementIo (framework/src/ops/norm_act_passes.h) for LibTorch's c10::BFloat16 and c10::Half, so
// the CPU tests run the fused kernels' thread functions on the types LibTorch's CPU kernels use;
// both round to nearest even, as CUDA's __float2bfloat16 and __float2half (ops/cuda_element_io.h).
// One definition shared by norm_act_passes_test.cpp and pool_passes_test.cpp (one executable).
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "ops/norm_act_passes.h"

namespace tp::ops {

template <>
struct ElementIo<c10::BFloat16> {
  static float to_float(c10::BFloat16 v) { return static_cast<float>(v); }
  static c10::BFloat16 from_float(float v) { return c10::BFloat16(v); }
};

template <>
struct ElementIo<c10::Half> {
  static float to_float(c10::Half v) { return static_cast<float>(v); }
  static c10::Half from_float(float v) { return c10::Half(v); }
};

}  // namespace tp::ops
