// AutocastGuard: the C++ counterpart of Python's `with torch.autocast(device_type, dtype):`.
//
// Autocast state is per thread and per device type (cpu and cuda have separate switches and
// dtypes). The guard sets it for one device type for its lifetime and restores exactly what was
// there before, so guards nest, and a guard inside a plugin call or a callback cannot leak state
// into the next step.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include "tp/framework/amp/precision.h"

namespace tp {

/// RAII scope in which eligible ops on `device_type` run in a lower-precision dtype.
///
/// On entry: saves the previous enabled flag and dtype of `device_type`, sets the dtype, then
/// enables (in that order: if setting the dtype fails, autocast was never switched on), and
/// increments LibTorch's autocast nesting counter. On exit: decrements the nesting, clears the
/// autocast weight cache when the outermost guard closes (the cache holds low-precision copies
/// of the parameters, reused within one forward), and restores the saved flag and dtype.
///
/// A guard for Precision::Fp32 does nothing at all (not even disable autocast in an enclosing
/// region): fp32 means mixed precision is off for the run.
///
/// Thread tag: [main]; construct and destroy on the same thread (the state is thread-local).
/// Not copyable or movable. Gradients and parameters stay float32; backward needs no guard
/// (autograd runs each op's backward in the dtype of its forward).
///
/// Example:
///   {
///     tp::AutocastGuard autocast(c10::DeviceType::CPU, tp::Precision::Bf16);
///     at::Tensor y = at::matmul(x, w);  // bf16
///   }
///   at::Tensor z = at::matmul(x, w);    // float32 again
class AutocastGuard {
 public:
  /// Autocast for `precision` on `device_type` (Fp32: a no-op guard). Throws tp::Error when the
  /// device type has no autocast in LibTorch; state is then unchanged.
  AutocastGuard(c10::DeviceType device_type, Precision precision);

  /// Autocast to `dtype` (kHalf or kBFloat16) on `device_type`. Throws tp::Error for any other
  /// dtype or a device type without autocast; state is then unchanged. LibTorch 2.13's
  /// set_autocast_dtype accepts any dtype (float64 included) without complaint, so the guard
  /// validates it itself.
  AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype);

  /// Restores the previous state (see the class comment). Never throws.
  ~AutocastGuard();

  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;
  AutocastGuard(AutocastGuard&&) = delete;
  AutocastGuard& operator=(AutocastGuard&&) = delete;

  /// False for a no-op (Fp32) guard.
  bool active() const noexcept { return active_; }

 private:
  void enter(c10::ScalarType dtype);

  c10::DeviceType device_type_;
  bool active_ = false;
  bool previous_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Undefined;
};

}  // namespace tp
