// Training precision ([amp] precision = "fp32" | "fp16" | "bf16") and the start-up check that the
// chosen precision can run on the chosen device.
//
// Mixed precision in torchhost means: parameters, gradients and optimizer state stay float32;
// the forward pass (model and loss) runs under an AutocastGuard that lets LibTorch run eligible
// ops (matmul, conv, linear) in the low-precision dtype. fp16 also needs a GradScaler, because
// fp16 gradients underflow (max 65504, smallest normal 6e-5); bf16 has float32's exponent range
// and needs none.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string_view>

#include "tp/framework/config/value_kinds.h"

namespace tp {

// Precision, parse_precision() and to_string(Precision) are the config layer's (amp.precision is
// a value kind, parsed when the config is loaded: RunConfig::amp.precision is a Precision).

/// The autocast dtype of `precision`: kHalf, kBFloat16, or kFloat for Fp32.
c10::ScalarType autocast_dtype(Precision precision) noexcept;

/// True for Fp16, the one precision whose gradients need loss scaling (GradScaler enabled).
bool needs_grad_scaler(Precision precision) noexcept;

/// Checks at start-up, before any step runs, that `precision` can run on `device`; throws
/// ConfigError (key "amp.precision") saying what to change when it cannot:
///   - Fp32 runs everywhere.
///   - CPU: fp16 and bf16 autocast both exist in LibTorch 2.3+ (bf16 is fast on CPUs with
///     avx512_bf16/AMX; fp16 is mostly emulated on CPUs and slower than fp32).
///   - CUDA: CUDA must be available to this LibTorch build; bf16 needs compute capability
///     >= 8.0 (Ampere). Older GPUs only emulate bf16, slower than fp32, so we refuse it there
///     (Python's autocast accepts it) and suggest fp16.
///   - Other device types: refused; torchhost autocasts only on cpu and cuda.
/// Cost: on CUDA, queries the device properties once (initialises the CUDA context).
void check_precision_supported(Precision precision, c10::Device device);

}  // namespace tp
