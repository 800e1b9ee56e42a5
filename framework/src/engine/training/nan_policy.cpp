#include "engine/training/nan_policy.h"

#include <algorithm>

namespace tp {

NanChecks nan_checks(Precision precision, c10::DeviceType device, NanPolicy nan_policy) {
  const bool skip = nan_policy == NanPolicy::kSkip;
  // fp16: the grad scaler skips steps whose scaled gradients overflow, so "skip" is its job. A
  // loss that is already inf/NaN in the forward is no overflow a smaller scale can fix (every
  // later step would be skipped): "stop" stops, where the other precisions do.
  if (precision == Precision::Fp16) return {device == c10::DeviceType::CPU && !skip, !skip};
  return {device == c10::DeviceType::CPU || skip, !skip};
}

int64_t scaler_skip_warning_threshold(int64_t steps) { return std::max<int64_t>(20, steps / 50); }

}  // namespace tp
