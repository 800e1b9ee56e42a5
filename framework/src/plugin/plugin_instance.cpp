#include "tp/framework/plugin/plugin_instance.h"

#include "tp/framework/error.h"
#include "tp/framework/plugin/host_services.h"

namespace tp {

void PluginInstance::check(tp_status status, const char* function, const std::string& context) const {
  if (status == TP_OK) return;
  std::string message = HostServices::take_last_error();
  if (message.empty()) message = "(the plugin gave no message)";
  throw PluginError(info_->id, function,
                    "plugin component '" + info_->id + "' (" + library_->path().filename().string() + ") failed in " +
                        function + (context.empty() ? "" : " for " + context) + " with " + status_name(status) +
                        ": " + message);
}

}  // namespace tp
