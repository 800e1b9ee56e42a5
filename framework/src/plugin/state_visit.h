// Collects what a plugin's visit_state reports into StateTensor values (aliases, not copies).
#pragma once

#include <vector>

#include "tp/framework/plugin/plugin_instance.h"
#include "tp/iface/tensor.h"

namespace tp::detail {

inline tp_status collect_state_entry(void* user, const char* name, tp_tensor tensor, bool is_buffer) {
  if (name == nullptr || tensor == nullptr) return TP_ERR_INVALID_ARGUMENT;
  // Copying an at::Tensor shares its TensorImpl: the alias sees and makes in-place updates.
  static_cast<std::vector<StateTensor>*>(user)->push_back(
      {name, *reinterpret_cast<const at::Tensor*>(tensor), is_buffer});
  return TP_OK;
}

}  // namespace tp::detail
