#include "tp/framework/profile/memory.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <sys/resource.h>

#include <cmath>

#include "device_index.h"

namespace tp {
double peak_memory_mb(const c10::Device& device) {
  if (device.is_cpu()) {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_maxrss) * 1024.0 / 1e6; // Linux: kilobytes
  }
  // Device-generic (c10::DeviceAllocator), so this compiles against a CPU-only LibTorch; it is
  // only reached with an accelerator device.
  const auto stats = c10::getDeviceAllocator(device.type())->getDeviceStats(detail::concrete_device(device).index());
  const auto aggregate = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return static_cast<double>(stats.allocated_bytes[aggregate].peak) / 1e6;
}

double device_total_memory_mb(const c10::Device& device) {
  if (device.is_cpu()) return std::nan("");
  try {
    const auto free_and_total =
        c10::getDeviceAllocator(device.type())->getMemoryInfo(detail::concrete_device(device).index());
    return static_cast<double>(free_and_total.second) / 1e6;
  } catch (const c10::Error&) {
    return std::nan(""); // an allocator without getMemoryInfo
  }
}

void reset_peak_memory(const c10::Device& device) {
  if (device.is_cpu()) return;
  c10::getDeviceAllocator(device.type())->resetPeakStats(detail::concrete_device(device).index());
}

void release_cached_memory(const c10::Device& device) {
  if (device.is_cpu()) return;
  c10::getDeviceAllocator(device.type())->emptyCache();
}

}  // namespace tp
