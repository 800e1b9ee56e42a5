#include "tp/framework/plugin/callback_proxy.h"

#include "tp/framework/plugin/plugin_crash.h"

#include "config_adapter.h"
#include "sized_copy.h"

namespace tp {

CallbackProxy::CallbackProxy(ComponentEntry entry, const ComponentConfig& config)
    : PluginInstance(std::move(entry)), table_(detail::sized_copy<tp_callback_v1_t>(info_->interface_table)) {
  auto view = detail::make_config_view(config);
  const tp_status status =
      in_plugin_call(id().c_str(), "create", [&] { return table_.create(library_->host(), view->view(), &self_); });
  check_create(status, self_);
}

CallbackProxy::~CallbackProxy() { in_plugin_call(id().c_str(), "destroy", [&] { table_.destroy(self_); }); }

uint32_t CallbackProxy::on_event(const tp_event_t& event) {
  uint32_t requests = TP_REQUEST_NONE;
  tp_status status = TP_OK;
  {
    const PluginCallScope crash_scope(id().c_str(), "on_event", UINT64_MAX, UINT64_MAX, library_->path().c_str());  // plugin/plugin_crash.h
    status = table_.on_event(self_, &event, &requests);
  }
  check(status, "on_event");
  return requests;
}

}  // namespace tp
