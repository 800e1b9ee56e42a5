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

/// Starts a new peak on an accelerator (torch.cuda.reset_peak_memory_stats); no-op on CPU,
/// whose peak RSS cannot be reset.
void reset_peak_memory(const c10::Device& device);

}  // namespace tp
