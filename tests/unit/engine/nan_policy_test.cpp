// Where a non-finite training loss is caught (nan_policy.h), for every precision, device type
// and policy: a pure decision, so the CUDA rows are checked on a machine without a GPU. The
// rows that matter: bf16 on CUDA with "stop" was caught nowhere (no per-step read, no scaler,
// and the logging read threw for fp32 only).
#include <doctest/doctest.h>

#include "engine/training/nan_policy.h"

using tp::NanChecks;
using tp::Precision;

namespace {

NanChecks checks(Precision p, c10::DeviceType d, const char* policy) {
  return tp::nan_checks(p, d, tp::try_parse_choice<tp::NanPolicy>(policy).value());
}

}  // namespace

TEST_CASE("nan_policy = stop: bf16 and fp32 are caught on every device without a per-step sync on CUDA") {
  for (Precision p : {Precision::Fp32, Precision::Bf16}) {
    CAPTURE(static_cast<int>(p));
    const NanChecks cuda = checks(p, c10::DeviceType::CUDA, "stop");
    CHECK_FALSE(cuda.per_step); // a per-step host read would sync the device every step
    CHECK(cuda.at_read);        // caught at the logging/epoch read the host makes anyway
    const NanChecks cpu = checks(p, c10::DeviceType::CPU, "stop");
    CHECK(cpu.per_step);        // free on the CPU: the error names the exact step
    CHECK(cpu.at_read);
  }
}

TEST_CASE("nan_policy = skip decides before the update, on every device") {
  for (Precision p : {Precision::Fp32, Precision::Bf16})
    for (c10::DeviceType d : {c10::DeviceType::CPU, c10::DeviceType::CUDA}) {
      const NanChecks c = checks(p, d, "skip");
      CHECK(c.per_step);
      CHECK_FALSE(c.at_read); // skipped windows never reach the logged sum
    }
}

TEST_CASE("fp16: skip is the grad scaler's job, stop still stops a loss non-finite in the forward") {
  for (c10::DeviceType d : {c10::DeviceType::CPU, c10::DeviceType::CUDA}) {
    const NanChecks skip = checks(Precision::Fp16, d, "skip");
    CHECK_FALSE(skip.per_step); // the scaler skips overflowing steps itself
    CHECK_FALSE(skip.at_read);
    const NanChecks stop = checks(Precision::Fp16, d, "stop");
    CHECK(stop.at_read); // was false: an fp16 run with an inf loss trained to the end, every step skipped
    CHECK(stop.per_step == (d == c10::DeviceType::CPU));
  }
}

TEST_CASE("the scaler-skip warning: at least 20 skips, and 2% of a long run") {
  CHECK(tp::scaler_skip_warning_threshold(0) == 20);
  CHECK(tp::scaler_skip_warning_threshold(100) == 20);
  CHECK(tp::scaler_skip_warning_threshold(5000) == 100);
}
