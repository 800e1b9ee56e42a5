// train.on_oom: recognising that a training step ran out of device memory, and the report of one
// the run does not recover from (docs/engine.md, "Out of memory").
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <exception>
#include <string>

namespace tp {

/// True when `error` says the device ran out of memory: c10::OutOfMemoryError (the host's own
/// backward, or any allocation of a caching device allocator), a plugin call that returned
/// TP_ERR_OUT_OF_MEMORY (tp/cpp/guard.h maps c10::OutOfMemoryError to it), a plugin call that
/// returned TP_ERR_INTERNAL with CUDA's "CUDA out of memory" text (a plugin built before the guard
/// mapped it), or std::bad_alloc. Anything else, including no error, is false.
bool is_out_of_memory(const std::exception_ptr& error);

/// Where an out-of-memory error hit a training step.
struct OutOfMemorySite {
  std::string phase;        ///< "forward", "backward" or "optimizer step"
  int64_t samples = 0;      ///< samples in the piece of the micro-batch that failed (0: the update)
  int64_t step = 0;         ///< the optimizer step being trained (1-based)
  int64_t epoch = 0;        ///< 1-based
  int64_t batch_size = 0;   ///< train.batch_size
  int64_t grad_accum_steps = 0;
  int64_t splits = 1;       ///< pieces each micro-batch is cut into so far
};

/// The one-paragraph error of an out-of-memory step the run stops at: where and on how many
/// samples, the device's peak memory, why it was not split (`why_not_split`: "" under
/// train.on_oom = "fail") and what to do (host tune batch-size, train.on_oom = "split"), then the
/// error's own text.
std::string out_of_memory_report(const OutOfMemorySite& site, const c10::Device& device, const std::string& why_not_split,
                                 const std::exception_ptr& error);

}  // namespace tp
