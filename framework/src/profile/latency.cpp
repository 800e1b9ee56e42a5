#include "tp/framework/profile/latency.h"

#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "device_index.h"
#include "tp/framework/error.h"

namespace tp {

double quantile(const std::vector<double>& sorted, double q) {
  TP_CHECK(!sorted.empty(), "quantile of no samples");
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(rank));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (sorted[above] - sorted[below]) * (rank - static_cast<double>(below));
}

LatencyStats summarize(std::vector<double> samples_ms) {
  LatencyStats s;
  if (samples_ms.empty()) return s;
  std::sort(samples_ms.begin(), samples_ms.end());
  s.iterations = static_cast<int64_t>(samples_ms.size());
  s.mean_ms = std::accumulate(samples_ms.begin(), samples_ms.end(), 0.0) / static_cast<double>(samples_ms.size());
  s.p50_ms = quantile(samples_ms, 0.50);
  s.p90_ms = quantile(samples_ms, 0.90);
  s.p99_ms = quantile(samples_ms, 0.99);
  s.min_ms = samples_ms.front();
  s.max_ms = samples_ms.back();
  return s;
}

void synchronize_device(const c10::Device& device) {
  if (device.is_cpu()) return;
  c10::impl::VirtualGuardImpl(device.type()).synchronizeDevice(detail::concrete_device(device).index());
}

LatencyStats measure_latency(const std::function<void()>& work, const c10::Device& device, int64_t warmup,
                             int64_t iterations) {
  TP_CHECK(iterations >= 1 && warmup >= 0, "latency measurement needs iterations >= 1 and warmup >= 0 (got ",
           iterations, " and ", warmup, ")");
  for (int64_t i = 0; i < warmup; ++i) work();
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(iterations));
  if (device.is_cpu()) {
    for (int64_t i = 0; i < iterations; ++i) {
      const auto start = std::chrono::steady_clock::now();
      work();
      samples.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    return summarize(std::move(samples));
  }
  const c10::Device target = detail::concrete_device(device);
  const c10::impl::VirtualGuardImpl guard(target.type());
  // BACKEND_DEFAULT = events with timing (PYTORCH_DEFAULT disables timing on CUDA).
  c10::Event start(target.type(), c10::EventFlag::BACKEND_DEFAULT);
  c10::Event stop(target.type(), c10::EventFlag::BACKEND_DEFAULT);
  for (int64_t i = 0; i < iterations; ++i) {
    // One sync per repetition: the latency of a batch alone, not of a pipelined stream.
    synchronize_device(target);
    const c10::Stream stream = guard.getStream(target);
    start.record(stream);
    work();
    stop.record(stream);
    stop.synchronize();
    samples.push_back(start.elapsedTime(stop));
  }
  return summarize(std::move(samples));
}

}  // namespace tp
