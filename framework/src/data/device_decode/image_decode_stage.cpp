#include "data/device_decode/image_decode_stage.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "data/device_decode/nvjpeg_decoder.h"
#include "data/device_decode/resize_kernel.h"
#include "tp/framework/data/batch_layout.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

using device_decode::DecodeCounts;
using device_decode::DecoderChoice;
using device_decode::DecodedImage;
using device_decode::EncodedImage;
using device_decode::NvjpegDecoder;
using device_decode::ResizeJob;
using device_decode::ResizeOutput;

constexpr int kBoxFields = 7;  // x0, y0, x1, y1, flip, height, width (plugin ABI 1.11)

/// The field `name` of `batch`, taken out of it; undefined when absent.
at::Tensor take(NamedTensors& batch, const std::string& name, std::size_t* position = nullptr) {
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].first != name) continue;
    at::Tensor t = std::move(batch[i].second);
    batch.erase(batch.begin() + static_cast<std::ptrdiff_t>(i));
    if (position != nullptr) *position = i;
    return t;
  }
  return {};
}

/// Whether `box` (one row of <name>_box) is a crop the device can cut from the stored image.
bool usable(const int32_t* box) {
  const int32_t x0 = box[0], y0 = box[1], x1 = box[2], y1 = box[3], height = box[5], width = box[6];
  return height > 0 && width > 0 && x0 >= 0 && y0 >= 0 && x0 < x1 && y0 < y1 && x1 <= width && y1 <= height;
}

class ImageDecodeStage final : public BatchStage {
 public:
  ImageDecodeStage(EncodedImageSpec spec, c10::Device device, std::size_t threads, double cpu_share,
                   std::unique_ptr<NvjpegDecoder> first)
      : spec_(std::move(spec)), device_(device), cpu_share_(cpu_share), decoders_(threads), locks_(threads) {
    decoders_[0] = std::move(first);
  }

  bool wants_encoded() const override { return true; }
  std::vector<std::string> ragged_fields() const override { return {spec_.name}; }

  std::string summary() const override {
    int64_t device_buffers = 0, pinned_buffers = 0, decoders = 0;
    for (std::size_t slot = 0; slot < decoders_.size(); ++slot) {
      // A decoder busy in a thread a timeout gave up on is left out rather than waited for.
      const std::unique_lock<std::mutex> lock(locks_[slot], std::try_to_lock);
      if (!lock.owns_lock() || !decoders_[slot]) continue;
      device_buffers += decoders_[slot]->allocations().device.load();
      pinned_buffers += decoders_[slot]->allocations().pinned.load();
      ++decoders;
    }
    return "data.decode = \"gpu\": " + std::to_string(hardware_.load()) + " images decoded on the JPEG engines (" +
           std::to_string(regions_.load()) + " of them as the region around their crop), " +
           std::to_string(cuda_.load()) + " by nvJPEG's CUDA decoder, " + std::to_string(cpu_.load()) +
           " on the CPU (not a JPEG the GPU reads, or its decode failed), " + std::to_string(failed_.load()) +
           " failed there too, " + std::to_string(shared_.load()) +
           " decoded on the loader threads meanwhile (data.decode_cpu_share); nvJPEG allocated " + std::to_string(device_buffers) + " device buffers (caching allocator) and " +
           std::to_string(pinned_buffers) + " pinned ones over " + std::to_string(decoders) + " decoders";
  }

  NamedTensors run(NamedTensors batch, uint32_t worker, const Refetch& refetch,
                   std::vector<FailedRow>& failed) const override {
    std::size_t position = 0;
    const at::Tensor bytes = take(batch, spec_.name, &position);
    const at::Tensor offsets = take(batch, BatchLayout::offsets_name(spec_.name));
    const at::Tensor boxes = take(batch, spec_.name + "_box");
    TP_CHECK(bytes.defined() && offsets.defined() && boxes.defined() && bytes.scalar_type() == at::kByte &&
                 boxes.scalar_type() == at::kInt && boxes.dim() == 2 && boxes.size(1) == kBoxFields,
             "data.decode = \"gpu\": the batch lacks the encoded form of '", spec_.name, "' (uint8 bytes, their ",
             "offsets and int32 [B, 7] '", spec_.name, "_box'); the dataset plugin broke the ABI 1.11 contract");
    const int64_t rows = boxes.size(0);
    const auto* box = boxes.data_ptr<int32_t>();
    const auto* offset = offsets.data_ptr<int64_t>();
    const auto* data = bytes.data_ptr<uint8_t>();

    const std::size_t slot = worker % decoders_.size();
    const std::lock_guard<std::mutex> lock(locks_[slot]);
    NvjpegDecoder& decoder = decoder_for(slot);
    const c10::cuda::CUDAGuard device_guard(device_);
    const c10::cuda::CUDAStreamGuard stream_guard(decoder.stream());
    // 1. Decode on the device every row whose plugin read its size (a JPEG header) and drew a
    //    usable crop, but the batch's last data.decode_cpu_share, which this thread decodes on the
    //    CPU path while the device works (the same rows every run, so a run repeats exactly).
    const auto shared = static_cast<int64_t>(std::ceil(cpu_share_ * static_cast<double>(rows)));
    std::vector<EncodedImage> encoded;
    std::vector<int64_t> encoded_rows, cpu_rows;
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t* b = box + r * kBoxFields;
      if (r >= rows - shared || !usable(b)) {
        cpu_rows.push_back(r);
        continue;
      }
      encoded.push_back(
          {data + offset[r], static_cast<std::size_t>(offset[r + 1] - offset[r]), b[5], b[6], b[0], b[1], b[2], b[3]});
      encoded_rows.push_back(r);
    }
    DecodeCounts counts;
    std::vector<DecodedImage> decoded = decoder.decode(encoded, counts);
    // 2. One kernel: crop, resize, flip and normalise every decoded row into the output.
    at::Tensor out = at::empty({rows, 3, spec_.out_height, spec_.out_width},
                               at::TensorOptions().dtype(at::kFloat).device(device_).memory_format(
                                   spec_.channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous));
    std::vector<ResizeJob> jobs;
    for (std::size_t i = 0; i < decoded.size(); ++i) {
      const int64_t r = encoded_rows[i];
      if (!decoded[i].ok) {
        cpu_rows.push_back(r);
        continue;
      }
      // The crop in the decoded pixels' coordinates: they may hold a region of the image.
      const int32_t* b = box + r * kBoxFields;
      const DecodedImage& d = decoded[i];
      jobs.push_back({d.pixels.data_ptr<uint8_t>(), d.width, d.height, d.width * 3, b[0] - d.x0, b[1] - d.y0,
                      b[2] - d.x0, b[3] - d.y0, b[4], static_cast<int32_t>(r)});
    }
    if (!jobs.empty()) launch(jobs, out, decoder);
    // 3. The rest on the dataset's CPU path (same sample, same seed) while the device decodes, then
    //    uploaded into their rows together.
    fill_from_cpu(out, cpu_rows, refetch, failed);
    decoder.stream().synchronize();  // the consumer gets finished pixels (this thread waits, not it)
    hardware_ += counts.hardware;
    regions_ += counts.regions;
    cuda_ += counts.cuda;
    cpu_ += static_cast<int64_t>(cpu_rows.size()) - shared;  // those the device could not take
    shared_ += shared;
    batch.insert(batch.begin() + static_cast<std::ptrdiff_t>(std::min(position, batch.size())),
                 {spec_.name, std::move(out)});
    return batch;
  }

 private:
  NvjpegDecoder& decoder_for(std::size_t slot) const {
    if (!decoders_[slot])
      decoders_[slot] = std::make_unique<NvjpegDecoder>(device_, DecoderChoice::kEnginesWhereAvailable);
    return *decoders_[slot];
  }

  void launch(const std::vector<ResizeJob>& jobs, at::Tensor& out, const NvjpegDecoder& decoder) const {
    // The jobs go to the device from pinned memory on the decode stream (the caching host allocator
    // keeps the staging block until the stream has read it).
    const auto job_bytes = static_cast<int64_t>(jobs.size() * sizeof(ResizeJob));
    at::Tensor staged = at::empty({job_bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
    std::memcpy(staged.data_ptr<uint8_t>(), jobs.data(), static_cast<std::size_t>(job_bytes));
    const at::Tensor on_device = staged.to(device_, /*non_blocking=*/true);
    ResizeOutput target{};
    target.data = out.data_ptr<float>();
    for (int d = 0; d < 4; ++d) target.stride[d] = out.stride(d);
    target.height = static_cast<int32_t>(spec_.out_height);
    target.width = static_cast<int32_t>(spec_.out_width);
    for (int c = 0; c < 3; ++c) {
      target.mean[c] = spec_.mean[static_cast<std::size_t>(c)];
      target.std[c] = spec_.std[static_cast<std::size_t>(c)];
    }
    const cudaError_t status = device_decode::launch_resize(
        reinterpret_cast<const ResizeJob*>(on_device.data_ptr<uint8_t>()), static_cast<int>(jobs.size()), target,
        decoder.stream().stream());
    if (status != cudaSuccess)
      throw Error(std::string("data.decode = \"gpu\": the resize kernel did not start: ") + cudaGetErrorString(status));
  }

  /// `rows` from the dataset's CPU path into a pinned staging batch, then onto the device on the
  /// decode stream: no copy waits for the device's decode, so this thread's decoding overlaps it.
  /// A row whose CPU path fails is zeroed and reported in `failed`.
  void fill_from_cpu(at::Tensor& out, const std::vector<int64_t>& rows, const Refetch& refetch,
                     std::vector<FailedRow>& failed) const {
    if (rows.empty()) return;
    const at::Tensor staging =
        at::empty({static_cast<int64_t>(rows.size()), 3, spec_.out_height, spec_.out_width},
                  at::TensorOptions().dtype(at::kFloat).pinned_memory(true));
    std::vector<bool> ok(rows.size(), false);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      try {
        staging[static_cast<int64_t>(i)].copy_(cpu_pixels(refetch(static_cast<std::size_t>(rows[i]))));
        ok[i] = true;
      } catch (const std::exception& e) {
        ++failed_;
        failed.emplace_back(static_cast<std::size_t>(rows[i]), e.what());
      }
    }
    const at::Tensor uploaded = staging.to(device_, /*non_blocking=*/true);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (ok[i]) out[rows[i]].copy_(uploaded[static_cast<int64_t>(i)], /*non_blocking=*/true);
      else out[rows[i]].zero_();
    }
  }

  /// The decoded image field of one sample from the CPU path; throws when it is not what the
  /// dataset declared.
  at::Tensor cpu_pixels(const NamedTensors& sample) const {
    for (const auto& [name, tensor] : sample) {
      if (name != spec_.name) continue;
      TP_CHECK(tensor.dim() == 3 && tensor.size(0) == 3 && tensor.size(1) == spec_.out_height &&
                   tensor.size(2) == spec_.out_width && tensor.is_floating_point(),
               "the CPU path's '", spec_.name, "' is ", tensor.sizes(), ", not the declared [3, ", spec_.out_height,
               ", ", spec_.out_width, "]");
      return tensor;
    }
    throw Error("the CPU path's sample has no field '" + spec_.name + "'");
  }

  EncodedImageSpec spec_;
  c10::Device device_;
  double cpu_share_;  // data.decode_cpu_share: the share of each batch decoded on the CPU path meanwhile
  mutable std::vector<std::unique_ptr<NvjpegDecoder>> decoders_;  // one per loader thread, made on first use
  mutable std::vector<std::mutex> locks_;  // a thread a timeout replaced may still hold its slot's decoder
  mutable std::atomic<int64_t> hardware_{0}, regions_{0}, cuda_{0}, cpu_{0}, failed_{0}, shared_{0};
};

}  // namespace

std::string gpu_decoder_missing() { return ""; }

DeviceDecodeStart start_image_decode(const EncodedImageSpec& spec, c10::Device device, int64_t workers,
                                     double cpu_share) {
  if (!device.is_cuda()) return {nullptr, "", "the run does not train on CUDA [run.device]"};
  std::unique_ptr<NvjpegDecoder> first;
  try {
    first = std::make_unique<NvjpegDecoder>(device, DecoderChoice::kEnginesWhereAvailable);
  } catch (const std::exception& e) {
    return {nullptr, "", std::string("nvJPEG did not start on ") + device.str() + ": " + e.what()};
  }
  std::string backend = first->backend();
  const auto threads = static_cast<std::size_t>(workers > 0 ? workers : 1);
  return {std::make_shared<ImageDecodeStage>(spec, device, threads, cpu_share, std::move(first)), std::move(backend),
          ""};
}

}  // namespace tp
