// The device pass of data.decode = "gpu": from decoded RGB images to the model's input, one kernel
// for the whole batch: crop, resize (OpenCV's INTER_AREA when shrinking in both directions,
// INTER_LINEAR when enlarging, INTER_AREA along the shrinking side then INTER_LINEAR when one side
// shrinks and the other grows; rounded to 8 bits as the CPU path's cv::resize is: resize_math.h),
// flip, normalise. Plain CUDA
// (no LibTorch in the nvcc translation unit, so it compiles in seconds).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tp::device_decode {

/// One image's work: where its decoded pixels are, the crop, the flip, its row of the output.
struct ResizeJob {
  const uint8_t* src;   ///< RGB interleaved, `pitch` bytes per row, on the device
  int32_t src_width, src_height, pitch;
  int32_t x0, y0, x1, y1;  ///< the crop, x1 and y1 exclusive, inside the image
  int32_t flip;            ///< mirror left-right after resizing
  int32_t row;             ///< the output row (batch index)
};

/// The output and its normalisation: out[row, c, y, x] at out + row * stride[0] + c * stride[1] +
/// y * stride[2] + x * stride[3] (float elements) = (v / 255 - mean[c]) / std[c], the CPU path's arithmetic.
struct ResizeOutput {
  float* data;
  int64_t stride[4];
  int32_t height, width;
  float mean[3], std[3];
};

/// Enqueues the pass for `count` jobs (`jobs`: on the device) on `stream`. Returns the launch's
/// error (cudaSuccess when enqueued).
cudaError_t launch_resize(const ResizeJob* jobs, int count, const ResizeOutput& out, cudaStream_t stream);

}  // namespace tp::device_decode
