// Collects what a plugin's visit_state reports into StateTensor values (aliases, not copies).
#pragma once

#include <string>
#include <vector>

#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/plugin_instance.h"
#include "tp/framework/util/abi_guard.h"
#include "tp/iface/tensor.h"

namespace tp::detail {

/// The tp_state_visitor the host passes to visit_state; `user` is a std::vector<StateTensor>.
/// Runs in the plugin's frame, so it never throws (util/abi_guard.h): a failure to store the
/// entry (out of memory) is returned as a status, which stops the visit and fails the call.
inline tp_status collect_state_entry(void* user, const char* name, tp_tensor tensor, bool is_buffer) noexcept {
  if (user == nullptr || name == nullptr || tensor == nullptr) return TP_ERR_INVALID_ARGUMENT;
  return guard_status(
      [&] {
        // Copying an at::Tensor shares its TensorImpl: the alias sees and makes in-place updates.
        static_cast<std::vector<StateTensor>*>(user)->push_back(
            {name, *reinterpret_cast<const at::Tensor*>(tensor), is_buffer});
        return TP_OK;
      },
      [](const char* what) { HostServices::set_last_error(what); });
}

}  // namespace tp::detail
