#include "copy_stream.h"

#include "tp/framework/error.h"

#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace tp {

#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2

struct CopyStream::Impl {
  explicit Impl(c10::Device d) : device(d), stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, d.index())) {}
  c10::Device device;
  c10::cuda::CUDAStream stream;
};

CopyStream::CopyStream(c10::Device device) : impl_(std::make_unique<Impl>(device)) {
  TP_CHECK(device.is_cuda(), "a copy stream needs a CUDA device, not ", device.str());
}

CopyStream::~CopyStream() = default;

at::Tensor CopyStream::to_device(const at::Tensor& host) const {
  const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(impl_->device.index());
  at::Tensor out;
  {
    // The source is host memory the loader finished writing: the copy needs no wait before it.
    const c10::cuda::CUDAStreamGuard on_copy_stream(impl_->stream);
    out = host.to(impl_->device, /*non_blocking=*/true);
  }
  at::cuda::CUDAEvent copied;
  copied.record(impl_->stream);
  copied.block(compute);
  out.record_stream(compute);
  return out;
}

#else  // a CPU build of LibTorch has no CUDA streams; BatchPlacement never asks for one there

struct CopyStream::Impl {};

CopyStream::CopyStream(c10::Device device) {
  throw Error("a copy stream needs a CUDA build of LibTorch (device " + device.str() + ")");
}
CopyStream::~CopyStream() = default;
at::Tensor CopyStream::to_device(const at::Tensor& host) const { return host; }

#endif

}  // namespace tp
