// torchhost C++ helpers for Tier T model plugins: the state a model lends through visit_state, and
// the device and dtype arguments of to_device. Every model plugin needs the same plumbing, and it
// has traps (a vector that moves under lent handles, Module::to turning BatchNorm's int64
// num_batches_tracked into a float); written once here, it is right once.
//
//   struct Instance { std::shared_ptr<Net> net; std::vector<tp::cpp::StateEntry> state; };
//   create:      instance->state = tp::cpp::collect_state(*instance->net);
//   to_device:   tp::cpp::move_state(m.state, tp::cpp::device_of(type, index), tp::cpp::float_dtype(dtype));
//                m.state = tp::cpp::collect_state(*m.net);
//   visit_state: return tp::cpp::visit_state_entries(m.state, visit, user);
#ifndef TP_CPP_MODEL_STATE_H
#define TP_CPP_MODEL_STATE_H

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tp/cpp/tensor.h"
#include "tp/iface/model.h"

namespace tp::cpp {

/// One parameter or buffer as visit_state lends it. `tensor` shares its TensorImpl with the
/// module's own tensor, so the host's in-place optimizer updates reach the module.
struct StateEntry {
  std::string name;
  at::Tensor tensor;
  bool is_buffer;
};

namespace detail {
// torch::nn::Module lists items with key()/value(), torch::jit::Module with name/value members.
template <typename Item>
auto item_name(const Item& item) -> decltype(item.key()) { return item.key(); }
template <typename Item>
auto item_name(const Item& item) -> decltype((item.name)) { return item.name; }
template <typename Item>
auto item_tensor(const Item& item) -> decltype(item.value()) { return item.value(); }
template <typename Item>
auto item_tensor(const Item& item) -> decltype((item.value)) { return item.value; }
}  // namespace detail

/// [main] The parameters, then the defined buffers, of `module` (a torch::nn::Module or a
/// torch::jit::Module), recursively, in registration order, under their dotted names. The host
/// borrows handles into the returned entries, so keep the vector unchanged until the next
/// collection; collect again after to_device (which invalidates lent handles anyway).
template <typename Module>
std::vector<StateEntry> collect_state(const Module& module) {
  std::vector<StateEntry> state;
  for (const auto& item : module.named_parameters(/*recurse=*/true))
    state.push_back({detail::item_name(item), detail::item_tensor(item), false});
  for (const auto& item : module.named_buffers(/*recurse=*/true))
    if (detail::item_tensor(item).defined()) state.push_back({detail::item_name(item), detail::item_tensor(item), true});
  return state;
}

/// [main] visit_state's body: calls `visit` for each entry in order with a borrowed handle and
/// returns the first status that is not TP_OK (the visitor recorded its own message). Throws
/// Failure for a NULL visitor, so call it inside TP_GUARD.
inline tp_status visit_state_entries(const std::vector<StateEntry>& state, tp_state_visitor visit, void* user) {
  if (visit == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "visit_state: visitor is NULL");
  for (const StateEntry& entry : state) {
    const tp_status status = visit(user, entry.name.c_str(), borrow_handle(entry.tensor), entry.is_buffer);
    if (status != TP_OK) return status;
  }
  return TP_OK;
}

/// [any] The floating type a to_device `dtype` (TP_DTYPE_FLOAT32, FLOAT64, FLOAT16, BFLOAT16)
/// names; throws Failure(TP_ERR_INVALID_ARGUMENT) for any other.
inline at::ScalarType float_dtype(int32_t dtype) {
  switch (dtype) {
    case TP_DTYPE_FLOAT32: return at::kFloat;
    case TP_DTYPE_FLOAT64: return at::kDouble;
    case TP_DTYPE_FLOAT16: return at::kHalf;
    case TP_DTYPE_BFLOAT16: return at::kBFloat16;
    default:
      throw Failure(TP_ERR_INVALID_ARGUMENT, "to_device: dtype must be a floating TP_DTYPE_*, got " + std::to_string(dtype));
  }
}

/// [any] The device to_device's (device_type, device_index) names; throws
/// Failure(TP_ERR_INVALID_ARGUMENT) for an unknown type.
inline at::Device device_of(int32_t device_type, int32_t device_index) {
  if (device_type == TP_DEVICE_CPU) return at::Device(at::kCPU);
  if (device_type == TP_DEVICE_CUDA) return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_index));
  throw Failure(TP_ERR_INVALID_ARGUMENT, "to_device: unknown device type " + std::to_string(device_type));
}

/// [main] Moves every tensor of `state` to `device`, floating ones also to `dtype`. Integer
/// buffers keep their type: Module::to(device, dtype) would make BatchNorm's int64
/// num_batches_tracked a float. set_data keeps each TensorImpl, so the module's own members
/// (a BatchNorm's running_mean, ...) follow. Lent handles are invalid afterwards: collect again.
inline void move_state(std::vector<StateEntry>& state, at::Device device, at::ScalarType dtype) {
  for (StateEntry& entry : state)
    entry.tensor.set_data(entry.tensor.is_floating_point() ? entry.tensor.to(device, dtype) : entry.tensor.to(device));
}

}  // namespace tp::cpp

#endif  // TP_CPP_MODEL_STATE_H
