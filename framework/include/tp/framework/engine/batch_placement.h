// A batch's way from the loader to the model: the device copy and the memory format. The step
// and the evaluation both place batches here, so a batch-level transform (mixup, cutmix, device
// normalisation) lands in this one role and both see it.
#pragma once

#include <c10/core/Device.h>

#include <memory>
#include <vector>

#include "tp/framework/data/sample_source.h"
#include "tp/framework/plugin/plugin_instance.h"

namespace tp {

class ModelProxy;
class CopyStream;

class BatchPlacement {
 public:
  /// `channels_last` (run.channels_last): 4-D floating fields are made channels-last.
  /// `copy_stream` (data.device_prefetch, CUDA only): batches are copied on a stream of their own.
  BatchPlacement(c10::Device device, bool channels_last, bool copy_stream = false);
  ~BatchPlacement();
  BatchPlacement(BatchPlacement&&) noexcept;
  BatchPlacement& operator=(BatchPlacement&&) noexcept;

  /// [main] `batch` on the device. From pinned host memory (the loader pins on CUDA) the copy is
  /// asynchronous (non_blocking); with a copy stream it runs there, overlapping the work already
  /// queued on the current stream, which waits for it (an event, no host sync) before the
  /// batch's first use. On the CPU nothing is copied.
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
  std::unique_ptr<CopyStream> copy_stream_;
};

}  // namespace tp
