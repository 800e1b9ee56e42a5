// nvJPEG for data.decode = "gpu": one decoder per loader thread, batched on the GPU's hardware
// JPEG engines where it has them (A100, H100, H200: NVJPEG_BACKEND_HARDWARE) and image by image
// with nvJPEG's CUDA decoder for what they cannot take (progressive scans, 4:1:0 and 4:1:1
// subsampling) or on a GPU without them. Private to the device decode stage.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/cuda/CUDAStream.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tp::device_decode {

/// One encoded image, the size its plugin read from its header, and the part of it the caller
/// reads (x1, y1 exclusive, inside the image).
struct EncodedImage {
  const uint8_t* data;  ///< the file's bytes (pinned host memory: the batch's)
  std::size_t size;
  int height, width;
  int x0, y0, x1, y1;
};

/// One decoded image, or the region of it that holds the caller's part: RGB interleaved, `width`
/// * 3 bytes a row, on the device, its top-left pixel at (x0, y0) of the image; undefined where
/// the decoder could not decode it.
struct DecodedImage {
  at::Tensor pixels;  ///< uint8 [height, width * 3]
  int x0 = 0, y0 = 0, width = 0, height = 0;
  bool ok = false;
};

/// How the images of one decode() went.
struct DecodeCounts {
  int64_t hardware = 0;  ///< decoded batched on the JPEG engines
  int64_t regions = 0;   ///< of those, decoded as a region around the caller's part (not whole)
  int64_t cuda = 0;      ///< decoded one by one by nvJPEG's CUDA decoder
  int64_t failed = 0;    ///< not decoded (not a JPEG nvJPEG reads, a size other than the header's, corrupt)
};

/// How often nvJPEG asked for memory (its allocators count): in steady state it reuses its buffers.
struct AllocationCounts {
  std::atomic<int64_t> device{0};  ///< device buffers, from PyTorch's caching allocator
  std::atomic<int64_t> pinned{0};  ///< pinned host staging buffers
};

/// Which of nvJPEG's decoders a NvjpegDecoder may use.
enum class DecoderChoice {
  kEnginesWhereAvailable,  ///< the JPEG engines batched where the GPU has them, the CUDA decoder for the rest
  kCudaDecoderOnly,        ///< nvJPEG's CUDA decoder for every image (the decode-rate benchmark's comparison)
};

class NvjpegDecoder {
 public:
  /// nvJPEG on `device` (CUDA) with a stream of its own, its decoders as `choice` allows. Throws
  /// tp::Error naming nvJPEG's status when the library cannot start there.
  NvjpegDecoder(c10::Device device, DecoderChoice choice);
  ~NvjpegDecoder();
  NvjpegDecoder(const NvjpegDecoder&) = delete;
  NvjpegDecoder& operator=(const NvjpegDecoder&) = delete;

  /// Decodes `images` on stream() (asynchronously: the pixels are ready when the stream is). An
  /// image it cannot decode, or whose stored size differs from the declared one, comes back
  /// with ok = false and is counted as failed.
  std::vector<DecodedImage> decode(const std::vector<EncodedImage>& images, DecodeCounts& counts);
  /// The stream every decode and the caller's work on its output run on.
  const c10::cuda::CUDAStream& stream() const noexcept { return stream_; }
  /// "the GPU's JPEG engines (NVJPEG_BACKEND_HARDWARE)" or "nvJPEG's CUDA decoder".
  std::string backend() const;
  /// nvJPEG's allocations since this decoder started.
  const AllocationCounts& allocations() const noexcept { return *allocations_; }

 private:
  struct Handles;
  /// The images `batched` (indices into `images` and `out`) on the JPEG engines into their
  /// `out` buffers, as regions (each image's parameters) or whole. True when nvJPEG took them.
  bool decode_batched(const std::vector<EncodedImage>& images, const std::vector<std::size_t>& batched,
                      std::vector<DecodedImage>& out, bool regions);
  c10::Device device_;
  c10::cuda::CUDAStream stream_;
  std::unique_ptr<AllocationCounts> allocations_;  // where the allocators count; outlives handles_
  std::unique_ptr<Handles> handles_;  // nvJPEG's opaque handles (nvjpeg.h stays out of this header)
  bool interpolated_ = false;  // a handle took NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION
};

}  // namespace tp::device_decode
