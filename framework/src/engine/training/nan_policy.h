// Where a non-finite training loss is caught (train.nan_policy), as one decision of (precision,
// device, policy), so the CUDA choices can be tested on a machine without a GPU.
//
// Why two places: reading the loss on the host costs nothing on the CPU but is a device sync on
// CUDA, so on CUDA with nan_policy = "stop" the loss is checked only where the host reads it
// anyway (the logging read and the epoch's read), a few steps late; "skip" must decide before
// the update, so it pays a per-step read. fp16 leaves overflowing gradients to the grad scaler,
// which skips the step and lowers the scale; a loss non-finite in the forward still stops it
// under "stop" (no scale fixes that, and every later step would be skipped).
#pragma once

#include <c10/core/DeviceType.h>

#include <cstdint>
#include "tp/framework/amp/precision.h"
#include "tp/framework/config/choices.h"

namespace tp {

/// Where the trainer looks for a non-finite training loss.
struct NanChecks {
  bool per_step = false;  ///< read each micro-batch's loss (a device sync on CUDA)
  bool at_read = false;   ///< throw when the logged or epoch loss the host reads is non-finite
};

/// The checks for a run: per step on the CPU or with `nan_policy` = "skip", and at the host's
/// reads with "stop" (on every device, so bf16 and fp32 on CUDA stop too). fp16 with "skip"
/// none (the grad scaler skips); fp16 with "stop" as the others with "stop". Data-parallel, the
/// reads are all-reduced sums, so every rank sees the same value and all stop together.
NanChecks nan_checks(Precision precision, c10::DeviceType device, NanPolicy nan_policy);

/// Above this many fp16 grad-scaler skips in a run of `steps` optimizer steps the run ends with
/// a warning (max(20, 2% of the steps)): a healthy run skips a handful while the scale settles
/// and about one per amp.growth_interval steps after that.
int64_t scaler_skip_warning_threshold(int64_t steps);

}  // namespace tp
