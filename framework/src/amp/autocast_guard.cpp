#include "tp/framework/amp/autocast_guard.h"

#include <ATen/autocast_mode.h>

#include "tp/framework/error.h"

namespace tp {
namespace {

// Same list as Python's torch.autocast: every autocast backend accepts these two (custom
// PrivateUse1 backends may declare others; torchhost does not target them).
bool is_autocast_dtype(c10::ScalarType dtype) {
  return dtype == c10::ScalarType::Half || dtype == c10::ScalarType::BFloat16;
}

}  // namespace

AutocastGuard::AutocastGuard(c10::DeviceType device_type, Precision precision) : device_type_(device_type) {
  if (precision != Precision::Fp32) enter(autocast_dtype(precision));
}

AutocastGuard::AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype) : device_type_(device_type) {
  enter(dtype);
}

void AutocastGuard::enter(c10::ScalarType dtype) {
  // Validate before touching any state: a throwing constructor runs no destructor, so nothing
  // may be left half-set.
  TP_CHECK(at::autocast::is_autocast_available(device_type_), "AutocastGuard: LibTorch has no autocast for device type ",
           c10::DeviceTypeName(device_type_, /*lower_case=*/true));
  TP_CHECK(is_autocast_dtype(dtype), "AutocastGuard: autocast dtype must be float16 or bfloat16, got ",
           c10::toString(dtype));
  previous_enabled_ = at::autocast::is_autocast_enabled(device_type_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_type_);
  // dtype first, then enable: if set_autocast_dtype ever throws (older LibTorch rejected non-bf16
  // CPU dtypes), autocast has not been switched on and the previous state stands.
  at::autocast::set_autocast_dtype(device_type_, dtype);
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // The cache holds the low-precision copies of leaf tensors (weights) made during this region;
  // dropping it at the outermost exit frees that memory, as Python's autocast.__exit__ does.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
}

}  // namespace tp
