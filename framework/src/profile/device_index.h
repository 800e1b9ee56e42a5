// Internal: a device with a concrete index, for APIs that take one (streams, allocator stats).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace tp::detail {

/// `device` itself for the CPU or an indexed device; "cuda" (no index) becomes the current
/// device of that type, as LibTorch resolves it for tensors.
inline c10::Device concrete_device(const c10::Device& device) {
  if (device.is_cpu() || device.has_index()) return device;
  return c10::impl::VirtualGuardImpl(device.type()).getDevice();
}

}  // namespace tp::detail
