// ElementIo (norm_act_passes.h) for CUDA's 16-bit types, shared by the fused ops' CUDA translation
// units (norm_act_kernels.cu, pool_kernels.cu): one definition of each specialisation. Host and
// device code, as the thread functions they serve are. Included by nvcc-compiled files only; the
// CPU tests specialise ElementIo for LibTorch's c10::BFloat16 and c10::Half instead (both round to
// nearest even, as these do).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/norm_act_passes.h"

namespace tp::ops {

template <>
struct ElementIo<__nv_bfloat16> {
  TP_HOST_DEVICE static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  TP_HOST_DEVICE static __nv_bfloat16 from_float(float v) { return __float2bfloat16(v); }  // nearest even, as at::BFloat16
};

template <>
struct ElementIo<__half> {
  TP_HOST_DEVICE static float to_float(__half v) { return __half2float(v); }
  TP_HOST_DEVICE static __half from_float(float v) { return __float2half(v); }  // nearest even
};

}  // namespace tp::ops
