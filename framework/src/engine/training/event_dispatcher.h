// The callbacks' side of the loop: packs one tp_event_t for the C ABI and ORs the requests the
// callbacks return. What the requests do, and when, is RunControl's (run_control.h; the table in
// plugin_api/include/tp/iface/callback.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/engine/scalars.h"
#include "tp/framework/plugin/callback_proxy.h"

namespace tp {

class EventDispatcher {
 public:
  /// `callbacks` must outlive the dispatcher.
  explicit EventDispatcher(std::vector<std::unique_ptr<CallbackProxy>>& callbacks) : callbacks_(callbacks) {}

  /// [main] Sends one event to every callback, in config order, and returns their requests ORed.
  /// `scalars` and `message` are borrowed for the calls. Free without callbacks.
  uint32_t dispatch(int32_t kind, int64_t step, int64_t epoch, double lr, const Scalars& scalars,
                    const std::string& message = "");
  /// Whether the run has callbacks (the same on every rank: they come from the config).
  bool any() const noexcept { return !callbacks_.empty(); }

 private:
  std::vector<std::unique_ptr<CallbackProxy>>& callbacks_;
};

}  // namespace tp
