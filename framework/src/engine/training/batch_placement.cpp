#include "tp/framework/engine/batch_placement.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "copy_stream.h"
#include "tp/framework/plugin/model_proxy.h"

namespace tp {

BatchPlacement::BatchPlacement(c10::Device device, bool channels_last, bool copy_stream)
    : device_(device), channels_last_(channels_last) {
  if (copy_stream && device.is_cuda()) copy_stream_ = std::make_unique<CopyStream>(device);
}

BatchPlacement::~BatchPlacement() = default;
BatchPlacement::BatchPlacement(BatchPlacement&&) noexcept = default;
BatchPlacement& BatchPlacement::operator=(BatchPlacement&&) noexcept = default;

NamedTensors BatchPlacement::to_device(NamedTensors batch) const {
  for (auto& [name, tensor] : batch) {
    if (!device_.is_cpu()) {
      // Only pinned memory copies asynchronously; a pageable source would make the copy stream
      // wait for the host anyway.
      if (copy_stream_ && tensor.is_cpu() && tensor.is_pinned()) {
        tensor = copy_stream_->to_device(tensor);
      } else if (tensor.device().type() == device_.type() &&
                 (!device_.has_index() || tensor.device().index() == device_.index())) {
        // Made on the device by a loader thread on a stream of its own (data.decode = "gpu"): marked
        // as used on this thread's stream too, so the allocator does not hand its memory to the
        // loader's next batch before the step that reads it has run.
        tensor.record_stream(c10::impl::VirtualGuardImpl(device_.type()).getStream(tensor.device()));
      } else {
        tensor = tensor.to(device_, /*non_blocking=*/true);
      }
    }
    if (channels_last_ && tensor.dim() == 4 && tensor.is_floating_point())
      tensor = tensor.contiguous(at::MemoryFormat::ChannelsLast);
  }
  return batch;
}

std::vector<StateTensor> BatchPlacement::place_model(ModelProxy& model) const {
  model.to_device(device_, c10::kFloat);
  std::vector<StateTensor> state = model.state(); // after to_device: handles from before are invalid
  if (channels_last_) {
    // Swap each 4-D tensor's storage in place (set_data), so the plugin's own handles see the new layout.
    c10::NoGradGuard no_grad;
    for (auto& s : state)
      if (s.tensor.dim() == 4) s.tensor.set_data(s.tensor.contiguous(at::MemoryFormat::ChannelsLast));
  }
  return state;
}

}  // namespace tp
