// torchhost C++ helpers for Tier T plugin authors: tp_tensor handles <-> at::Tensor.
//
// A tp_tensor is an opaque pointer to a heap-allocated at::Tensor (see tp/iface/tensor.h). Host
// and plugin share one LibTorch and one libstdc++ (the host checks the build fingerprint), so a
// handle allocated here with `new` is released by the host with `delete`.
#ifndef TP_CPP_TENSOR_H
#define TP_CPP_TENSOR_H

#ifndef TP_PLUGIN_TIER_T
#define TP_PLUGIN_TIER_T 1
#endif

#include <ATen/core/Tensor.h>
#include <torch/version.h>

#include <string>
#include <string_view>
#include <utility>

#include "tp/entry.h"
#include "tp/iface/tensor.h"
#include "tp/cpp/guard.h"

#ifndef TP_TORCH_DEVICE_BUILD
#error "TP_TORCH_DEVICE_BUILD is set by torchhost_add_plugin(TIER T) (1 = CPU, 2 = CUDA LibTorch)"
#endif

namespace tp::cpp {

/// Borrowed view of a handle; valid as long as the handle is.
inline at::Tensor& unwrap(tp_tensor handle) {
  if (handle == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "tensor handle is NULL");
  return *reinterpret_cast<at::Tensor*>(handle);
}

/// A new reference to `tensor`; the receiver releases it (host->tensor_release).
inline tp_tensor new_handle(at::Tensor tensor) {
  return reinterpret_cast<tp_tensor>(new at::Tensor(std::move(tensor)));
}

/// A borrowed handle that aliases `tensor` (no allocation); valid while `tensor` lives at the
/// same address. Used for visit_state.
inline tp_tensor borrow_handle(const at::Tensor& tensor) {
  return reinterpret_cast<tp_tensor>(const_cast<at::Tensor*>(&tensor));
}

/// The tensor named `name` among `fields`; throws TP_ERR_INVALID_ARGUMENT listing the names
/// present when it is missing. `role` ("input", "target", "output") goes into the message.
/// `name` is a view so that a literal makes no temporary string: binding the result to a
/// reference then draws no -Wdangling-reference from GCC 13 and later.
inline const at::Tensor& find(const tp_named_tensor_t* fields, uint32_t count, std::string_view name,
                              const char* role) {
  std::string present;
  for (uint32_t i = 0; i < count; ++i) {
    if (name == fields[i].name) return unwrap(fields[i].tensor);
    present += (present.empty() ? "" : ", ") + std::string(fields[i].name);
  }
  throw Failure(TP_ERR_INVALID_ARGUMENT,
                "no " + std::string(role) + " named '" + std::string(name) + "' (present: " + present + ")");
}

}  // namespace tp::cpp

/// Build fingerprint of a Tier T library; use as the `build` member of tp_entry.
#define TP_TORCH_BUILD_INFO_INIT \
  {sizeof(tp_build_info_t), TORCH_VERSION, _GLIBCXX_USE_CXX11_ABI, TP_TORCH_DEVICE_BUILD}

#endif  // TP_CPP_TENSOR_H
