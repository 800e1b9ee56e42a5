// What the data loader reads from: an indexable source of samples made of named CPU tensors.
// DatasetProxy (a dataset plugin behind the C ABI) is the production implementation; tests use
// in-memory sources.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/data/batch_layout.h"
#include "tp/framework/data/named_tensors.h"
#include "tp/iface/dataset.h"

namespace tp {

/// An image field a source can hand over encoded, for the host to decode on the device (plugin ABI
/// 1.11, tp_encoded_image_t; docs/datasets.md, "Decoding on the GPU"). Asked with
/// ctx.encoded_images set, get() returns the field `name` as the stored file's bytes (uint8 [N])
/// and `<name>_box` (int32 [7]: the crop x0, y0, x1, y1, the flip, the stored height and width),
/// in place of the pixels [3, out_height, out_width] it returns otherwise.
struct EncodedImageSpec {
  std::string name;        ///< the pixel field it replaces ("image")
  bool available = false;  ///< false: this split cannot, and `reason` says why
  std::string reason;      ///< one sentence naming the key that prevents it
  int64_t out_height = 0;  ///< the pixel field's size, the same for every sample
  int64_t out_width = 0;
  std::array<float, 3> mean{};  ///< pixel = (rgb / 255 - mean[c]) / std[c]
  std::array<float, 3> std{1.0F, 1.0F, 1.0F};
  bool channels_last = false;   ///< the pixel field's layout on the CPU path
};

/// An indexable collection of samples. Implementations say which calls may run concurrently.
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  /// Number of samples; constant. [main]
  virtual uint64_t size() const = 0;
  /// The sample at `index` (< size()). Tensors are CPU and may borrow the source's memory until
  /// destroyed. [worker]: concurrent calls allowed unless serial() is true. Throws tp::Error
  /// (or a subclass) naming the source and index on failure.
  virtual NamedTensors get(uint64_t index, const tp_worker_ctx_t& ctx) const = 0;
  /// True when get() must not run concurrently (the loader then serialises the calls).
  virtual bool serial() const = 0;
  /// Called before each epoch while no get() runs. [main]
  virtual void set_epoch(uint64_t epoch) = 0;
  /// Human-readable name for messages ("org.torchhost.shapes (train)").
  virtual std::string name() const = 0;
  /// How this source's fields form batches (plugin ABI 1.6); constant. Empty: every field
  /// stacks. [any]
  virtual const BatchLayout& batch_layout() const {
    static const BatchLayout kEveryFieldStacks;
    return kEveryFieldStacks;
  }
  /// The contiguous groups the samples are stored in (plugin ABI 1.10, tp_dataset_v1_t::
  /// sample_groups): each group's end index, strictly increasing, the last equal to size(); group
  /// g holds [ends[g - 1], ends[g]). Empty: the samples are independent (the sampler permutes
  /// them one by one). Constant. [any]
  virtual const std::vector<uint64_t>& sample_groups() const {
    static const std::vector<uint64_t> kIndependentSamples;
    return kIndependentSamples;
  }
  /// The image fields this source can hand over encoded (plugin ABI 1.11); empty: none. Constant.
  /// [any]
  virtual const std::vector<EncodedImageSpec>& encoded_images() const {
    static const std::vector<EncodedImageSpec> kPixelsOnly;
    return kPixelsOnly;
  }
};

}  // namespace tp
