// A batch's way from the loader to the model: the device copy and the memory format. The step
// and the evaluation both place batches here, so a batch-level transform (mixup, cutmix, device
// normalisation) lands in this one role and both see it.
#pragma once

#include <c10/core/Device.h>

#include <vector>

#include "tp/framework/data/sample_source.h"
#include "tp/framework/plugin/plugin_instance.h"

namespace tp {

class ModelProxy;

class BatchPlacement {
 public:
  /// `channels_last` (run.channels_last): 4-D floating fields are made channels-last.
  BatchPlacement(c10::Device device, bool channels_last) : device_(device), channels_last_(channels_last) {}

  /// [main] `batch` on the device. From pinned host memory (the loader pins on CUDA) the copy is
  /// asynchronous (non_blocking); on the CPU nothing is copied.
  NamedTensors to_device(NamedTensors batch) const;
  /// [main] Moves `model` to the device in float32 and, with channels_last, makes its 4-D
  /// tensors channels-last in place (what module.to(memory_format=torch.channels_last) does), so
  /// batches and weights agree. Returns the model's state handles, valid from now on (those taken
  /// before are not).
  std::vector<StateTensor> place_model(ModelProxy& model) const;
  c10::Device device() const noexcept { return device_; }

 private:
  c10::Device device_;
  bool channels_last_;
};

}  // namespace tp
