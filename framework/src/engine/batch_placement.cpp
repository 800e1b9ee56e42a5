#include "tp/framework/engine/batch_placement.h"

#include <ATen/ATen.h>

namespace tp {

NamedTensors BatchPlacement::to_device(NamedTensors batch) const {
  for (auto& [name, tensor] : batch) {
    if (!device_.is_cpu()) tensor = tensor.to(device_, /*non_blocking=*/true);
    if (channels_last_ && tensor.dim() == 4 && tensor.is_floating_point())
      tensor = tensor.contiguous(at::MemoryFormat::ChannelsLast);
  }
  return batch;
}

}  // namespace tp
