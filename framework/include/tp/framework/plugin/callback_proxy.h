// Host-side handle of a callback component ("tp.callback/1").
#pragma once

#include "tp/framework/config/run_config.h"
#include "tp/framework/plugin/plugin_instance.h"
#include "tp/iface/callback.h"

namespace tp {

class CallbackProxy : public PluginInstance {
 public:
  CallbackProxy(ComponentEntry entry, const ComponentConfig& config);
  ~CallbackProxy();
  /// Delivers one event; returns the TP_REQUEST_* mask the callback set.
  uint32_t on_event(const tp_event_t& event);

 private:
  tp_callback_v1_t table_{};
  void* self_ = nullptr;
};

}  // namespace tp
