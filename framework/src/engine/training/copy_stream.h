// data.device_prefetch: host-to-device copies of batches on a CUDA stream of their own, so the
// copy of batch N+1 overlaps the kernels of step N (which sit on the compute stream) instead of
// waiting behind them. Private to BatchPlacement; the CUDA calls live in copy_stream.cpp.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>

namespace tp {

class CopyStream {
 public:
  /// A stream of `device` (CUDA) for copies. Throws tp::Error in a CPU build of LibTorch.
  explicit CopyStream(c10::Device device);
  ~CopyStream();
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;

  /// [main] `host` (pinned) on the device, copied on the copy stream; the calling thread's current
  /// stream waits for the copy (an event, no host sync), and the result is marked as used there,
  /// so the allocator does not hand its memory out again before the current stream is done with it.
  at::Tensor to_device(const at::Tensor& host) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tp
