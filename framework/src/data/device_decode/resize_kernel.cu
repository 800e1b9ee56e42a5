// The device pass of data.decode = "gpu" (resize_kernel.h): resize_math.h's arithmetic per output
// pixel, then the flip and the normalisation of the CPU path's write_pixels. One thread per output
// pixel and its three channels; one launch for the batch (blockIdx.y: the image).
#include "data/device_decode/resize_kernel.h"

#include "data/device_decode/resize_math.h"

namespace tp::device_decode {
namespace {

constexpr int kThreads = 256;

__global__ void resize_normalise(const ResizeJob* jobs, ResizeOutput out) {
  const ResizeJob job = jobs[blockIdx.y];
  const int p = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (p >= out.height * out.width) return;
  const int oy = p / out.width;
  const int ox_out = p % out.width;
  // The flip mirrors the resized image: output column x holds the resized column width - 1 - x.
  const int ox = job.flip != 0 ? out.width - 1 - ox_out : ox_out;
  float level[3];
  resize_pixel(job.src, job.pitch, job.x0, job.y0, job.x1 - job.x0, job.y1 - job.y0, out.width, out.height, ox, oy,
               level);
  float* dst = out.data + job.row * out.stride[0] + oy * out.stride[2] + ox_out * out.stride[3];
  for (int c = 0; c < 3; ++c) dst[c * out.stride[1]] = (level[c] / 255.0F - out.mean[c]) / out.std[c];
}

}  // namespace

cudaError_t launch_resize(const ResizeJob* jobs, int count, const ResizeOutput& out, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const int pixels = out.height * out.width;
  const dim3 grid(static_cast<unsigned>((pixels + kThreads - 1) / kThreads), static_cast<unsigned>(count));
  resize_normalise<<<grid, kThreads, 0, stream>>>(jobs, out);
  return cudaGetLastError();
}

}  // namespace tp::device_decode
