// Base of the host-side proxies (ModelProxy, LossProxy, ...): one live component instance, the
// library that must outlive it, and the status check every call goes through (TP_CALL).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

#include "tp/framework/plugin/registry.h"
#include "tp/status.h"

namespace tp {

/// A parameter, buffer or metric state tensor of a plugin object. `tensor` aliases the plugin's own
/// tensor: in-place updates (optimizer steps, checkpoint loads, all-reduces) change the plugin.
struct StateTensor {
  std::string name;
  at::Tensor tensor;
  bool is_buffer = false;
};

/// Throws PluginError naming the component `info` of `library`, `function` and the plugin's message
/// when `status` is not TP_OK; `context` (e.g. "sample 17") is added to the message. For calls
/// made without an instance (a dataset's prepare); instances use PluginInstance::check.
void check_plugin_call(const ComponentInfo& info, const PluginLibrary& library, tp_status status, const char* function,
                       const std::string& context = "");

class PluginInstance {
 public:
  PluginInstance(const PluginInstance&) = delete;
  PluginInstance& operator=(const PluginInstance&) = delete;
  /// The component id ("org.torchhost.small_cnn").
  const std::string& id() const { return info_->id; }
  const ComponentInfo& info() const { return *info_; }

 protected:
  explicit PluginInstance(ComponentEntry entry) : library_(std::move(entry.library)), info_(entry.info) {}
  ~PluginInstance() = default;

  /// Throws PluginError naming the component, `function` and the plugin's message when
  /// `status` is not TP_OK. `context` (e.g. "sample 17") is added to the message.
  void check(tp_status status, const char* function, const std::string& context = "") const;
  /// Checks what the plugin's `create` returned: throws as check(status, "create", context) does,
  /// and also when `status` is TP_OK but `instance` (the `*out_self` it filled) is NULL, naming the
  /// component and create, so no later call is handed a NULL self. Every proxy calls it right after
  /// its create.
  void check_create(tp_status status, const void* instance, const std::string& context = "") const;
  std::shared_ptr<PluginLibrary> library_;
  const ComponentInfo* info_;
};

}  // namespace tp
