#include "data/device_decode/nvjpeg_decoder.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <algorithm>
#include <utility>

#include "data/device_decode/decode_region.h"
#include "tp/framework/error.h"

namespace tp::device_decode {

/// What nvJPEG's allocators are handed: where to count, and the decoder's device and stream
/// (outside the anonymous namespace: NvjpegDecoder::Handles holds one).
struct NvjpegAllocatorContext {
  AllocationCounts* counts;
  c10::DeviceIndex device;
  cudaStream_t stream;
};

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

// nvJPEG's device buffers from PyTorch's caching allocator: its default (cudaMalloc/cudaFree) would
// synchronise the whole device at every free, the training stream included, and stall the step the
// loader threads feed. Always on the decoder's own device and stream, whatever nvJPEG passes (it
// may pass stream 0 from its initialisation) and whichever device the calling thread has current:
// every nvJPEG call runs on that stream, so a block freed there is safe to hand out again there.
int device_malloc(void* context, void** ptr, std::size_t size, cudaStream_t /*stream*/) {
  const auto* c = static_cast<const NvjpegAllocatorContext*>(context);
  try {
    const c10::cuda::CUDAGuard guard(c->device);
    *ptr = c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(size, c->stream);
  } catch (const std::exception&) {
    return 1;  // nvJPEG reports NVJPEG_STATUS_ALLOCATOR_FAILURE, and the rows go to the CPU path
  }
  c->counts->device.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

int device_free(void* context, void* ptr, std::size_t /*size*/, cudaStream_t /*stream*/) {
  const auto* c = static_cast<const NvjpegAllocatorContext*>(context);
  try {
    const c10::cuda::CUDAGuard guard(c->device);
    c10::cuda::CUDACachingAllocator::raw_delete(ptr);
  } catch (const std::exception&) {
    return 1;  // an exception must not cross nvJPEG's C frames; it reports the failure
  }
  return 0;
}

// Pinned staging buffers: nvJPEG's own calls (cudaHostAlloc, cudaFreeHost), counted, so that the
// report can say whether it reallocates in steady state (it reuses a buffer that is large enough).
int pinned_malloc(void* context, void** ptr, std::size_t size, cudaStream_t /*stream*/) {
  if (cudaHostAlloc(ptr, size, cudaHostAllocDefault) != cudaSuccess) return 1;
  static_cast<const NvjpegAllocatorContext*>(context)->counts->pinned.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

int pinned_free(void* /*context*/, void* ptr, std::size_t /*size*/, cudaStream_t /*stream*/) {
  return cudaFreeHost(ptr) == cudaSuccess ? 0 : 1;
}

nvjpegImage_t destination(DecodedImage& decoded) {
  nvjpegImage_t d{};
  d.channel[0] = decoded.pixels.data_ptr<uint8_t>();
  d.pitch[0] = static_cast<std::size_t>(decoded.width) * 3;
  return d;
}

}  // namespace

struct NvjpegDecoder::Handles {
  // Declared first, destroyed last: nvJPEG's handles free their buffers through the allocators,
  // which read this context, and nvJPEG keeps pointers to the allocator tables.
  NvjpegAllocatorContext allocator_context{};
  nvjpegDevAllocatorV2_t device_allocator{};
  nvjpegPinnedAllocatorV2_t pinned_allocator{};
  nvjpegHandle_t hardware = nullptr;  // the JPEG engines; null where the GPU has none
  nvjpegJpegState_t hardware_state = nullptr;
  nvjpegJpegStream_t parsed = nullptr;  // a header parsed to ask the engines whether they take it
  nvjpegHandle_t cuda = nullptr;        // nvJPEG's default backend: every baseline and progressive JPEG
  nvjpegJpegState_t cuda_state = nullptr;
  int batch_size = 0;  // the engines' state is initialised for this many images (0: not yet)
  std::vector<nvjpegDecodeParams_t> regions;  // one per batched image: its output format and region

  /// The parameters of the batch's image at `position`, created when first needed; nullptr where
  /// nvJPEG cannot create them.
  nvjpegDecodeParams_t params_at(std::size_t position) {
    if (regions.size() <= position) {
      nvjpegDecodeParams_t params = nullptr;
      if (nvjpegDecodeParamsCreate(hardware, &params) != NVJPEG_STATUS_SUCCESS) return nullptr;
      regions.push_back(params);
    }
    return regions[position];
  }

  ~Handles() {
    for (nvjpegDecodeParams_t params : regions) nvjpegDecodeParamsDestroy(params);
    if (parsed != nullptr) nvjpegJpegStreamDestroy(parsed);
    if (hardware_state != nullptr) nvjpegJpegStateDestroy(hardware_state);
    if (hardware != nullptr) nvjpegDestroy(hardware);
    if (cuda_state != nullptr) nvjpegJpegStateDestroy(cuda_state);
    if (cuda != nullptr) nvjpegDestroy(cuda);
  }
};

NvjpegDecoder::NvjpegDecoder(c10::Device device, DecoderChoice choice)
    : device_(device),
      stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.has_index() ? device.index() : 0)),
      allocations_(std::make_unique<AllocationCounts>()),
      handles_(std::make_unique<Handles>()) {
  const c10::cuda::CUDAGuard guard(device_);
  handles_->allocator_context = {allocations_.get(), stream_.device_index(), stream_.stream()};
  handles_->device_allocator = {&device_malloc, &device_free, &handles_->allocator_context};
  handles_->pinned_allocator = {&pinned_malloc, &pinned_free, &handles_->allocator_context};
  // Chroma upsampled by interpolation, as libjpeg-turbo's default "fancy" upsampling does on the CPU
  // path (nvJPEG replicates by default); a backend that refuses the flag is taken without it.
  const auto create = [&](nvjpegBackend_t backend, nvjpegHandle_t* handle) {
    if (nvjpegCreateExV2(backend, &handles_->device_allocator, &handles_->pinned_allocator, NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION,
                         handle) == NVJPEG_STATUS_SUCCESS) {
      interpolated_ = true;
      return NVJPEG_STATUS_SUCCESS;
    }
    *handle = nullptr;
    return nvjpegCreateExV2(backend, &handles_->device_allocator, &handles_->pinned_allocator, NVJPEG_FLAGS_DEFAULT, handle);
  };
  // The engines where the GPU has them; NVJPEG_STATUS_ARCH_MISMATCH (or any refusal) where not.
  if (choice == DecoderChoice::kEnginesWhereAvailable &&
      create(NVJPEG_BACKEND_HARDWARE, &handles_->hardware) == NVJPEG_STATUS_SUCCESS) {
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
    // nvJPEG's handles go here, on the decoder's device (their buffers return to its allocator),
    // once nothing of theirs still runs on the stream.
    const c10::cuda::CUDAGuard guard(device_);
    stream_.synchronize();
    handles_.reset();
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
  int64_t regions = 0;  // batched images set up as regions
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
    DecodedImage& decoded = out[i];
    decoded.width = image.width;
    decoded.height = image.height;
    int unsupported = 1;
    if (handles_->hardware != nullptr &&
        nvjpegJpegStreamParseHeader(handles_->hardware, image.data, image.size, handles_->parsed) ==
            NVJPEG_STATUS_SUCCESS &&
        nvjpegDecodeBatchedSupported(handles_->hardware, handles_->parsed, &unsupported) == NVJPEG_STATUS_SUCCESS &&
        unsupported == 0) {
      // The engines decode only the region around the crop where they can (nvJPEG's ROI decode):
      // fewer pixels converted and written, less for the resize to read. An image whose parameters
      // nvJPEG cannot set up goes to the CUDA decoder alone, not the batch with it.
      nvjpegDecodeParams_t params = handles_->params_at(batched.size());
      if (params == nullptr || nvjpegDecodeParamsSetOutputFormat(params, NVJPEG_OUTPUT_RGBI) != NVJPEG_STATUS_SUCCESS) {
        single.push_back(i);
      } else {
        const DecodeRegion r = region_around(image.x0, image.y0, image.x1, image.y1, image.width, image.height);
        int region_unsupported = 1;
        if ((r.width < image.width || r.height < image.height) &&
            nvjpegDecodeParamsSetROI(params, r.x0, r.y0, r.width, r.height) == NVJPEG_STATUS_SUCCESS &&
            nvjpegDecodeBatchedSupportedEx(handles_->hardware, handles_->parsed, params, &region_unsupported) ==
                NVJPEG_STATUS_SUCCESS &&
            region_unsupported == 0) {
          decoded = {at::Tensor(), r.x0, r.y0, r.width, r.height, false};
          ++regions;
          batched.push_back(i);
        } else if (nvjpegDecodeParamsSetROI(params, 0, 0, -1, -1) == NVJPEG_STATUS_SUCCESS) {
          batched.push_back(i);
        } else {
          single.push_back(i);
        }
      }
    } else {
      single.push_back(i);
    }
    decoded.pixels = at::empty({decoded.height, static_cast<int64_t>(decoded.width) * 3},
                               at::TensorOptions().dtype(at::kByte).device(device_));
  }
  // A whole image where a region was set up (the image goes to the single path after all).
  auto whole = [&](std::size_t i) {
    DecodedImage& decoded = out[i];
    if (decoded.width == images[i].width && decoded.height == images[i].height) return;
    decoded = {at::empty({images[i].height, static_cast<int64_t>(images[i].width) * 3},
                         at::TensorOptions().dtype(at::kByte).device(device_)),
               0, 0, images[i].width, images[i].height, false};
  };
  if (!batched.empty()) {
    const auto n = static_cast<int>(batched.size());
    // Initialised once per batch size, as nvJPEG's documentation asks: a full batch keeps its size
    // from one call to the next, and a new initialisation may give the engines' buffers back.
    if (handles_->batch_size != n &&
        nvjpegDecodeBatchedInitialize(handles_->hardware, handles_->hardware_state, n, 1, NVJPEG_OUTPUT_RGBI) ==
            NVJPEG_STATUS_SUCCESS)
      handles_->batch_size = n;
    bool done = handles_->batch_size == n;
    // With regions, nvjpegDecodeBatchedEx and each image's parameters; where the engines refuse
    // that, every image whole through nvjpegDecodeBatched (the same pixels, more of them).
    if (done && regions > 0) {
      done = decode_batched(images, batched, out, /*regions=*/true);
      if (!done) {
        regions = 0;
        for (const std::size_t i : batched) whole(i);
      }
    }
    if (done && regions == 0) done = decode_batched(images, batched, out, /*regions=*/false);
    if (done) {
      for (const std::size_t i : batched) out[i].ok = true;
      counts.hardware += n;
      counts.regions += regions;
    } else {
      // One bad bitstream fails the engines' whole batch: each image again alone, so only it fails.
      handles_->batch_size = 0;  // initialised afresh for the next batch
      single.insert(single.end(), batched.begin(), batched.end());
    }
  }
  for (const std::size_t i : single) {
    whole(i);
    nvjpegImage_t d = destination(out[i]);
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

bool NvjpegDecoder::decode_batched(const std::vector<EncodedImage>& images, const std::vector<std::size_t>& batched,
                                   std::vector<DecodedImage>& out, bool regions) {
  std::vector<const unsigned char*> data;
  std::vector<std::size_t> sizes;
  std::vector<nvjpegImage_t> destinations;
  for (const std::size_t i : batched) {
    data.push_back(images[i].data);
    sizes.push_back(images[i].size);
    destinations.push_back(destination(out[i]));
  }
  if (regions)
    return nvjpegDecodeBatchedEx(handles_->hardware, handles_->hardware_state, data.data(), sizes.data(),
                                 destinations.data(), handles_->regions.data(), stream_.stream()) == NVJPEG_STATUS_SUCCESS;
  return nvjpegDecodeBatched(handles_->hardware, handles_->hardware_state, data.data(), sizes.data(),
                             destinations.data(), stream_.stream()) == NVJPEG_STATUS_SUCCESS;
}

}  // namespace tp::device_decode
