// Where a non-finite training loss is caught (train.nan_policy), as one decision of (precision,
// device, policy), so the CUDA choices can be tested on a machine without a GPU.
//
// Why two places: reading the loss on the host costs nothing on the CPU but is a device sync on
// CUDA, so on CUDA with nan_policy = "stop" the loss is checked only where the host reads it
// anyway (the logging read and the epoch's read), a few steps late; "skip" must decide before
// the update, so it pays a per-step read. fp16 leaves non-finite values to the grad scaler,
// which skips the step and lowers the scale.
#pragma once

#include <c10/core/DeviceType.h>

#include <string_view>

#include "tp/framework/amp/precision.h"

namespace tp {

/// Where the trainer looks for a non-finite training loss.
struct NanChecks {
  bool per_step = false;  ///< read each micro-batch's loss (a device sync on CUDA)
  bool at_read = false;   ///< throw when the logged or epoch loss the host reads is non-finite
};

/// The checks for a run: fp16 none (the grad scaler's job); otherwise per step on the CPU or
/// with `nan_policy` = "skip", and at the host's reads with "stop" (on every device, so bf16
/// and fp32 on CUDA stop too). Data-parallel, the reads are all-reduced sums, so every rank
/// sees the same value and all stop together.
NanChecks nan_checks(Precision precision, c10::DeviceType device, std::string_view nan_policy);

}  // namespace tp
