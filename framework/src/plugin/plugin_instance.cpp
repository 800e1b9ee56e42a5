#include "tp/framework/plugin/plugin_instance.h"

#include "tp/framework/error.h"
#include "tp/framework/plugin/host_services.h"

namespace tp {

void check_plugin_call(const ComponentInfo& info, const PluginLibrary& library, tp_status status, const char* function,
                       const std::string& context) {
  if (status == TP_OK) return;
  std::string message = HostServices::take_last_error();
  if (message.empty()) message = "(the plugin gave no message)";
  throw PluginError(info.id, function,
                    "plugin component '" + info.id + "' (" + library.path().filename().string() + ") failed in " +
                        function + (context.empty() ? "" : " for " + context) + " with " + status_name(status) +
                        ": " + message,
                    status);
}

void PluginInstance::check(tp_status status, const char* function, const std::string& context) const {
  check_plugin_call(*info_, *library_, status, function, context);
}

}  // namespace tp
