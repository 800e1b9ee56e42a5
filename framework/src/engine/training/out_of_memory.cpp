#include "engine/training/out_of_memory.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <new>

#include "tp/framework/error.h"
#include "tp/framework/exception_text.h"
#include "tp/framework/profile/memory.h"
#include "tp/status.h"

namespace tp {

bool is_out_of_memory(const std::exception_ptr& error) {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const c10::OutOfMemoryError&) {
    return true;
  } catch (const PluginError& e) {
    // The CUDA caching allocator's message; c10::OutOfMemoryError carries it too.
    return e.status() == TP_ERR_OUT_OF_MEMORY ||
           (e.status() == TP_ERR_INTERNAL && std::string(e.what()).find("CUDA out of memory") != std::string::npos);
  } catch (const std::bad_alloc&) {
    return true;
  } catch (...) {
    return false;
  }
}

std::string out_of_memory_report(const OutOfMemorySite& site, const c10::Device& device, const std::string& why_not_split,
                                 const std::exception_ptr& error) {
  char peak[64];
  std::snprintf(peak, sizeof peak, "%.0f MB", peak_memory_mb(device));
  const std::string where = site.samples > 0 ? " of " + std::to_string(site.samples) + " samples" : "";
  std::string message = "out of memory on " + device.str() + " in the " + site.phase + where + " at step " +
                        std::to_string(site.step) + " (epoch " + std::to_string(site.epoch) +
                        "; train.batch_size = " + std::to_string(site.batch_size) +
                        ", train.grad_accum_steps = " + std::to_string(site.grad_accum_steps) +
                        (site.splits > 1 ? ", micro-batches already cut in " + std::to_string(site.splits) + " pieces" : "") +
                        "); peak memory " + (device.is_cpu() ? "(resident, whole process) " : "allocated ") + peak + ". ";
  if (!why_not_split.empty()) message += "train.on_oom = \"split\" cannot recover: " + why_not_split + ". ";
  message += "Lower train.batch_size and raise train.grad_accum_steps to keep the global batch (host tune batch-size "
             "--keep-global-batch finds the largest that fits)";
  if (why_not_split.empty()) message += ", or set train.on_oom = \"split\" to cut micro-batches that do not fit in halves";
  return message + ". The error: " + exception_text(error);
}

}  // namespace tp
