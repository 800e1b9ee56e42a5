// A batch's way from the loader to the model: the device copy and the memory format. The step
// and the evaluation both place batches here, so a batch-level transform (mixup, cutmix, device
// normalisation) lands in this one role and both see it.
#pragma once

#include <c10/core/Device.h>

#include "tp/framework/data/sample_source.h"

namespace tp {

class BatchPlacement {
 public:
  /// `channels_last` (run.channels_last): 4-D floating fields are made channels-last.
  BatchPlacement(c10::Device device, bool channels_last) : device_(device), channels_last_(channels_last) {}

  /// [main] `batch` on the device. From pinned host memory (the loader pins on CUDA) the copy is
  /// asynchronous (non_blocking); on the CPU nothing is copied.
  NamedTensors to_device(NamedTensors batch) const;
  c10::Device device() const noexcept { return device_; }

 private:
  c10::Device device_;
  bool channels_last_;
};

}  // namespace tp
