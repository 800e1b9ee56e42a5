// Host-side conversions between at::Tensor and tp_tensor handles (iface/tensor.h), and between
// LibTorch devices/dtypes and the ABI's TP_DEVICE_* / TP_DTYPE_* codes.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>
#include <vector>

#include "tp/framework/data/sample_source.h"
#include "tp/iface/tensor.h"

namespace tp::detail {

/// A borrowed handle aliasing `tensor` (valid while `tensor` lives at that address).
inline tp_tensor borrow(const at::Tensor& tensor) {
  return reinterpret_cast<tp_tensor>(const_cast<at::Tensor*>(&tensor));
}

/// Takes ownership of a new-reference handle (the plugin allocated it) and frees the handle.
inline at::Tensor adopt(tp_tensor handle) {
  auto* owned = reinterpret_cast<at::Tensor*>(handle);
  at::Tensor tensor = std::move(*owned);
  delete owned;
  return tensor;
}

/// Borrowed views of `tensors` for one call; `tensors` must outlive the returned vector.
inline std::vector<tp_named_tensor_t> borrow_all(const NamedTensors& tensors) {
  std::vector<tp_named_tensor_t> views;
  views.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) views.push_back({name.c_str(), borrow(tensor)});
  return views;
}

int32_t to_tp_device(const c10::Device& device);
int32_t to_tp_dtype(c10::ScalarType dtype);
c10::ScalarType from_tp_dtype(int32_t dtype);

}  // namespace tp::detail
