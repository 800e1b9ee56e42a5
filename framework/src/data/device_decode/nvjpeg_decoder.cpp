#include "data/device_decode/nvjpeg_decoder.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <nvjpeg.h>

#include <utility>

#include "tp/framework/error.h"

namespace tp::device_decode {
namespace {

std::string status_text(nvjpegStatus_t status) {
  switch (status) {
    case NVJPEG_STATUS_SUCCESS: return "success";
    case NVJPEG_STATUS_NOT_INITIALIZED: return "not initialized";
    case NVJPEG_STATUS_INVALID_PARAMETER: return "invalid parameter";
    case NVJPEG_STATUS_BAD_JPEG: return "bad JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED: return "JPEG not supported";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE: return "allocator failure";
    case NVJPEG_STATUS_EXECUTION_FAILED: return "execution failed";
    case NVJPEG_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case NVJPEG_STATUS_INTERNAL_ERROR: return "internal error";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED: return "implementation not supported";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM: return "incomplete bitstream";
    default: return "status " + std::to_string(static_cast<int>(status));
  }
}

void check(nvjpegStatus_t status, const char* call) {
  if (status != NVJPEG_STATUS_SUCCESS)
    throw Error(std::string("data.decode = \"gpu\": nvJPEG's ") + call + " failed (" + status_text(status) +
                "); set data.decode = \"cpu\" to decode on the loader threads");
}

}  // namespace

struct NvjpegDecoder::Handles {
  nvjpegHandle_t hardware = nullptr;  // the JPEG engines; null where the GPU has none
  nvjpegJpegState_t hardware_state = nullptr;
  nvjpegJpegStream_t parsed = nullptr;  // a header parsed to ask the engines whether they take it
  nvjpegHandle_t cuda = nullptr;        // nvJPEG's default backend: every baseline and progressive JPEG
  nvjpegJpegState_t cuda_state = nullptr;

  ~Handles() {
    if (parsed != nullptr) nvjpegJpegStreamDestroy(parsed);
    if (hardware_state != nullptr) nvjpegJpegStateDestroy(hardware_state);
    if (hardware != nullptr) nvjpegDestroy(hardware);
    if (cuda_state != nullptr) nvjpegJpegStateDestroy(cuda_state);
    if (cuda != nullptr) nvjpegDestroy(cuda);
  }
};

NvjpegDecoder::NvjpegDecoder(c10::Device device)
    : device_(device),
      stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.has_index() ? device.index() : 0)),
      handles_(std::make_unique<Handles>()) {
  const c10::cuda::CUDAGuard guard(device_);
  // Chroma upsampled by interpolation, as libjpeg-turbo's default "fancy" upsampling does on the CPU
  // path (nvJPEG replicates by default); a backend that refuses the flag is taken without it.
  const auto create = [this](nvjpegBackend_t backend, nvjpegHandle_t* handle) {
    if (nvjpegCreateEx(backend, nullptr, nullptr, NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION, handle) ==
        NVJPEG_STATUS_SUCCESS) {
      interpolated_ = true;
      return NVJPEG_STATUS_SUCCESS;
    }
    *handle = nullptr;
    return nvjpegCreateEx(backend, nullptr, nullptr, NVJPEG_FLAGS_DEFAULT, handle);
  };
  // The engines where the GPU has them; NVJPEG_STATUS_ARCH_MISMATCH (or any refusal) where not.
  if (create(NVJPEG_BACKEND_HARDWARE, &handles_->hardware) == NVJPEG_STATUS_SUCCESS) {
    check(nvjpegJpegStateCreate(handles_->hardware, &handles_->hardware_state), "nvjpegJpegStateCreate");
    check(nvjpegJpegStreamCreate(handles_->hardware, &handles_->parsed), "nvjpegJpegStreamCreate");
  } else {
    handles_->hardware = nullptr;
  }
  check(create(NVJPEG_BACKEND_DEFAULT, &handles_->cuda), "nvjpegCreateEx");
  check(nvjpegJpegStateCreate(handles_->cuda, &handles_->cuda_state), "nvjpegJpegStateCreate");
}

NvjpegDecoder::~NvjpegDecoder() {
  try {
    stream_.synchronize();  // nothing of nvJPEG's may still run when its buffers go
  } catch (...) {  // NOLINT(bugprone-empty-catch): a failed device is reported where it failed
  }
}

std::string NvjpegDecoder::backend() const {
  return std::string(handles_->hardware != nullptr ? "nvJPEG on the GPU's JPEG engines (NVJPEG_BACKEND_HARDWARE)"
                                                   : "nvJPEG's CUDA decoder (no JPEG engines)") +
         (interpolated_ ? ", chroma interpolated" : "");
}

std::vector<DecodedImage> NvjpegDecoder::decode(const std::vector<EncodedImage>& images, DecodeCounts& counts) {
  const c10::cuda::CUDAGuard device_guard(device_);
  // The outputs are allocated on the decode stream: the caching allocator ties their blocks to it.
  const c10::cuda::CUDAStreamGuard stream_guard(stream_);
  std::vector<DecodedImage> out(images.size());
  std::vector<std::size_t> batched, single;
  for (std::size_t i = 0; i < images.size(); ++i) {
    const EncodedImage& image = images[i];
    int components = 0;
    nvjpegChromaSubsampling_t subsampling{};
    int widths[NVJPEG_MAX_COMPONENT] = {};
    int heights[NVJPEG_MAX_COMPONENT] = {};
    // The header as nvJPEG reads it must say what the plugin's did (the crop was drawn from that
    // size); 1 or 3 components (4, CMYK, is the CPU path's).
    if (nvjpegGetImageInfo(handles_->cuda, image.data, image.size, &components, &subsampling, widths, heights) !=
            NVJPEG_STATUS_SUCCESS ||
        widths[0] != image.width || heights[0] != image.height || (components != 1 && components != 3) ||
        subsampling == NVJPEG_CSS_UNKNOWN) {
      ++counts.failed;
      continue;
    }
    out[i].pixels = at::empty({image.height, static_cast<int64_t>(image.width) * 3},
                              at::TensorOptions().dtype(at::kByte).device(device_));
    int unsupported = 1;
    if (handles_->hardware != nullptr &&
        nvjpegJpegStreamParseHeader(handles_->hardware, image.data, image.size, handles_->parsed) ==
            NVJPEG_STATUS_SUCCESS &&
        nvjpegDecodeBatchedSupported(handles_->hardware, handles_->parsed, &unsupported) == NVJPEG_STATUS_SUCCESS &&
        unsupported == 0) {
      batched.push_back(i);
    } else {
      single.push_back(i);
    }
  }
  auto destination = [&](std::size_t i) {
    nvjpegImage_t d{};
    d.channel[0] = out[i].pixels.data_ptr<uint8_t>();
    d.pitch[0] = static_cast<std::size_t>(images[i].width) * 3;
    return d;
  };
  if (!batched.empty()) {
    std::vector<const unsigned char*> data;
    std::vector<std::size_t> sizes;
    std::vector<nvjpegImage_t> destinations;
    for (const std::size_t i : batched) {
      data.push_back(images[i].data);
      sizes.push_back(images[i].size);
      destinations.push_back(destination(i));
    }
    const auto n = static_cast<int>(batched.size());
    const bool done =
        nvjpegDecodeBatchedInitialize(handles_->hardware, handles_->hardware_state, n, 1, NVJPEG_OUTPUT_RGBI) ==
            NVJPEG_STATUS_SUCCESS &&
        nvjpegDecodeBatched(handles_->hardware, handles_->hardware_state, data.data(), sizes.data(),
                            destinations.data(), stream_.stream()) == NVJPEG_STATUS_SUCCESS;
    if (done) {
      for (const std::size_t i : batched) out[i].ok = true;
      counts.hardware += n;
    } else {
      // One bad bitstream fails the engines' whole batch: each image again alone, so only it fails.
      single.insert(single.end(), batched.begin(), batched.end());
    }
  }
  for (const std::size_t i : single) {
    nvjpegImage_t d = destination(i);
    if (nvjpegDecode(handles_->cuda, handles_->cuda_state, images[i].data, images[i].size, NVJPEG_OUTPUT_RGBI, &d,
                     stream_.stream()) == NVJPEG_STATUS_SUCCESS) {
      out[i].ok = true;
      ++counts.cuda;
    } else {
      out[i].pixels = at::Tensor();
      ++counts.failed;
    }
  }
  return out;
}

}  // namespace tp::device_decode
