// The callbacks' side of the loop: packs one tp_event_t for the C ABI, ORs the requests the
// callbacks return, agrees on them across ranks, and holds the requests that are honoured at the
// next window boundary (the table in plugin_api/include/tp/iface/callback.h).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/engine/scalars.h"
#include "tp/framework/plugin/callback_proxy.h"

namespace tp {

class DistContext;

class EventDispatcher {
 public:
  /// `callbacks` and `dist` (null = a single process) must outlive the dispatcher; `device` is
  /// where agreement tensors live (the process group's device).
  EventDispatcher(std::vector<std::unique_ptr<CallbackProxy>>& callbacks, DistContext* dist, c10::Device device)
      : callbacks_(callbacks), dist_(dist), device_(device) {}

  /// [main] Sends one event to every callback, in config order, and returns their requests ORed.
  /// `scalars` and `message` are borrowed for the calls. Free without callbacks.
  uint32_t dispatch(int32_t kind, int64_t step, int64_t epoch, double lr, const Scalars& scalars,
                    const std::string& message = "");
  /// [all ranks] ORs `requests` over ranks (one small all-reduce; the identity for a single
  /// process), so a stop or save one rank asks for happens on all. Call only where every rank
  /// dispatched the same event.
  uint32_t agree(uint32_t requests);
  /// Holds `requests` until the next window boundary, where the step runner agrees on them in
  /// the all-reduce it makes anyway.
  void defer(uint32_t requests) noexcept { deferred_ |= requests; }
  /// The held requests, now cleared.
  uint32_t take_deferred() noexcept { return std::exchange(deferred_, 0u); }

 private:
  std::vector<std::unique_ptr<CallbackProxy>>& callbacks_;
  DistContext* dist_;
  c10::Device device_;
  uint32_t deferred_ = 0;
};

}  // namespace tp
