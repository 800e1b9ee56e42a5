// Peak memory: the device caching allocator's peak of allocated bytes on an accelerator (what
// torch.cuda.max_memory_allocated reports), the process's peak resident set size on the CPU.
#pragma once

#include <c10/core/Device.h>

namespace tp {

/// Peak memory in MB (1e6 bytes). CUDA (any accelerator with a caching allocator): peak bytes
/// allocated by tensors since the last reset_peak_memory(device), or since start-up. CPU: the
/// process's peak resident set size since start-up (getrusage ru_maxrss): everything the
/// process touched (LibTorch, plugins, data loader), never reset. Does not synchronise.
double peak_memory_mb(const c10::Device& device);

/// The accelerator's total memory in MB (its allocator's getMemoryInfo, what
/// torch.cuda.mem_get_info()[1] reports), NaN on the CPU or where the allocator cannot say.
/// `host tune batch-size` reads it from report.toml as the limit a micro-batch must fit under.
double device_total_memory_mb(const c10::Device& device);

/// Starts a new peak on an accelerator (torch.cuda.reset_peak_memory_stats); no-op on CPU,
/// whose peak RSS cannot be reset.
void reset_peak_memory(const c10::Device& device);

/// Returns the accelerator's cached, unused blocks to the driver (torch.cuda.empty_cache), so a
/// retry after an out-of-memory error starts from unfragmented memory; no-op on CPU.
void release_cached_memory(const c10::Device& device);

}  // namespace tp
