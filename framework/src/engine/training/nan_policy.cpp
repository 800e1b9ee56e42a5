#include "tp/framework/engine/nan_policy.h"

namespace tp {

NanChecks nan_checks(Precision precision, c10::DeviceType device, std::string_view nan_policy) {
  if (precision == Precision::Fp16) return {};
  const bool skip = nan_policy == "skip";
  return {device == c10::DeviceType::CPU || skip, !skip};
}

}  // namespace tp
