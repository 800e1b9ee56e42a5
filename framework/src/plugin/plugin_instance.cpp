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

void PluginInstance::check_create(tp_status status, const void* instance, const std::string& context) const {
  check(status, "create", context);
  if (instance != nullptr) return;
  // `host plugins check` refuses the same (plugin_check_dataset.cpp); without this a run handed
  // NULL to the next call (a dataset's size), which then crashed or took the blame.
  throw PluginError(id(), "create",
                    "plugin component '" + id() + "' (" + library_->path().filename().string() +
                        ") failed in create" + (context.empty() ? "" : " for " + context) +
                        ": create returned TP_OK but no instance (it left *out_self NULL). A create that succeeds "
                        "sets *out_self to its new instance; one that fails returns an error status through "
                        "host->fail.");
}

}  // namespace tp
