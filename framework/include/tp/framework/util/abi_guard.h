// The one guard around every function the host hands to plugins: the tp_host_t entries
// (fail, log, get_service, tensor_release), the tp_config_t getters and the tp_state_visitor the
// host passes to visit_state. Those functions run inside plugin frames, which may be C compiled
// without unwind tables: an exception leaving them ends the process in std::terminate (the host's
// side of PLG-7, which forbids plugins the same: ARCH-3 in docs/architecture.md). Each such function is `noexcept` and puts its
// body in one of these two guards, so a failure becomes a status (or, for a void entry, a line on
// stderr) instead of an unwind.
#pragma once

#include <cstdio>
#include <exception>
#include <new>

#include "tp/status.h"

namespace tp::detail {

/// Runs `body` (returning tp_status) and returns its status. An exception becomes
/// TP_ERR_OUT_OF_MEMORY (std::bad_alloc) or TP_ERR_INTERNAL (anything else), and its text is
/// passed to `record(const char*)`, which stores it as the calling thread's last error; an
/// exception from `record` itself is dropped (the status still says what failed).
///
/// Example:
///   tp_status get_int(const void* self, const char* key, int64_t* out) noexcept {
///     return guard_status([&] { return lookup(self, key, out); }, record_last_error);
///   }
template <typename Body, typename Record>
tp_status guard_status(Body&& body, Record&& record) noexcept {
  const auto note = [&](const char* what) noexcept {
    try {
      record(what);
    } catch (...) {  // e.g. std::bad_alloc copying the text: the status alone must do
    }
  };
  try {
    return body();
  } catch (const std::bad_alloc&) {
    note("out of memory in a host service called by the plugin");
    return TP_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    note(e.what());
    return TP_ERR_INTERNAL;
  } catch (...) {
    note("unknown exception in a host service called by the plugin");
    return TP_ERR_INTERNAL;
  }
}

/// Runs `body` (returning void). An exception is reported on stderr with `what_failed` (a
/// string literal: printing it allocates nothing) and otherwise dropped: the caller has no
/// status to receive it.
template <typename Body>
void guard_void(const char* what_failed, Body&& body) noexcept {
  try {
    body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torchhost: %s failed: %s\n", what_failed, e.what());
  } catch (...) {
    std::fprintf(stderr, "torchhost: %s failed with an unknown exception\n", what_failed);
  }
}

}  // namespace tp::detail
