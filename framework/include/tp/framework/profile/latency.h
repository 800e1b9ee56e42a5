// Latency of a repeated piece of device work: warm-up, then N timed repetitions, summarised as
// mean and percentiles. CPU work is timed with the steady clock; accelerator work (CUDA) with
// device events recorded on the current stream around each repetition, read after a device
// synchronisation, so the time is the device's, not the launch overhead's.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace tp {

/// Summary of timed repetitions, in milliseconds.
struct LatencyStats {
  int64_t iterations = 0;
  double mean_ms = 0.0;
  double p50_ms = 0.0;
  double p90_ms = 0.0;
  double p99_ms = 0.0;
  double min_ms = 0.0;
  double max_ms = 0.0;
};

/// The q-quantile (0 <= q <= 1) of `sorted` (ascending, non-empty) with linear interpolation
/// between the two nearest ranks, as numpy.percentile's default ("linear") does.
double quantile(const std::vector<double>& sorted, double q);

/// Summarises `samples_ms` (any order; may be empty: all zero).
LatencyStats summarize(std::vector<double> samples_ms);

/// Runs `work` `warmup` times untimed, then `iterations` times timed one by one. On a non-CPU
/// device each repetition is bracketed by a device synchronisation (so repetitions do not
/// overlap) and timed with events (c10::Event, device-generic; no CUDA headers needed).
/// Throws tp::Error when iterations < 1 or warmup < 0.
LatencyStats measure_latency(const std::function<void()>& work, const c10::Device& device, int64_t warmup,
                             int64_t iterations);

/// Waits for all work queued on `device` (no-op on CPU).
void synchronize_device(const c10::Device& device);

}  // namespace tp
