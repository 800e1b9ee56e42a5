// The `shapes` plugin: component org.torchhost.shapes, a Tier S dataset of procedurally drawn
// circles, squares and triangles (see README.md). This file is the C ABI glue: schema,
// descriptor and the "tp.dataset/1" table; shapes_render.cpp draws the pixels.
#include <cstddef>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>

#include <opencv2/core.hpp>

#include "shapes_render.h"
#include "tp/cpp/config.h"
#include "tp/cpp/dlpack.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/plugin.h"
#include "tp/tp.h"

namespace {

using tp::cpp::Failure;
namespace shapes = tp::shapes;

/* Schema */

const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "size", TP_CFG_INT, "6000", "number of samples in the train split"},
    {sizeof(tp_config_key_t), "val_size", TP_CFG_INT, "1000", "number of samples in the val split"},
    {sizeof(tp_config_key_t), "image_size", TP_CFG_INT, "32",
     "side S of the square images, in pixels (16..1024)"},
    {sizeof(tp_config_key_t), "seed", TP_CFG_INT, "0",
     "content seed: which images the dataset holds; independent of the run seed"},
    {sizeof(tp_config_key_t), "noise", TP_CFG_FLOAT, "0.05",
     "std of additive, approximately Gaussian pixel noise in [0, 1] intensity units (0..1)"},
    {sizeof(tp_config_key_t), "augment", TP_CFG_BOOL, "true",
     "random horizontal flip of train samples, drawn from the host's per-sample seed"},
};

const tp_descriptor_t kDescriptor = {
    sizeof(tp_descriptor_t),
    "org.torchhost.shapes",
    TP_KIND_DATASET,
    TP_TIER_S,
    "1.0.0",
    "procedural circles/squares/triangles: image, label, bbox, mask, image2",
    kKeys,
    static_cast<uint32_t>(std::size(kKeys)),
    nullptr,
    0,
    0, // get_sample is thread-safe: no TP_DESCRIPTOR_SERIAL
};

/* Instance */

// Field order of every sample; names have static storage, as tp_field_t requires.
constexpr const char* kFieldNames[] = {"image", "label", "bbox", "mask", "image2"};
constexpr uint32_t kFieldCount = static_cast<uint32_t>(std::size(kFieldNames));

/// One split of the dataset. Immutable after create(), so get_sample needs no locking.
struct ShapesDataset {
  const tp_host_t* host;
  uint32_t split;      // shapes::SplitId
  uint64_t count;
  int64_t seed;
  bool augment;        // only ever true for the train split
  shapes::RenderOptions options;
};

const ShapesDataset& as_dataset(const void* self) {
  if (self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "shapes: dataset instance is NULL");
  return *static_cast<const ShapesDataset*>(self);
}

const tp_host_t* host_of(const void* self) {
  return self != nullptr ? static_cast<const ShapesDataset*>(self)->host : tp::cpp::plugin_host();
}

int64_t read_int_in(const tp::cpp::ConfigReader& cfg, const char* key, int64_t lo, int64_t hi) {
  const int64_t v = cfg.get_int(key);
  if (v < lo || v > hi)
    throw Failure(TP_ERR_CONFIG, std::string("shapes: ") + key + " = " + std::to_string(v) +
                                     " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

/// Pins OpenCV to one thread, once per process. Drawing is serial today; this keeps any OpenCV
/// call that could fan out (fill, resize) from spawning threads inside a host worker, since the
/// host already runs one loader worker per core. Once per process, not per thread:
/// cv::setNumThreads is process-wide and rebuilds OpenCV's thread pool, so several loader
/// workers calling it at once while another draws crashed (SIGSEGV in get_sample, 6 workers on a
/// 16-core machine); a function-local static runs it exactly once, before any worker draws.
void pin_opencv_threads() {
  static const bool pinned = [] {
    cv::setNumThreads(1);
    return true;
  }();
  (void)pinned;
}

/// Whether the train-split augmentation mirrors this sample, from the host's per-sample seed.
bool flip_for(const ShapesDataset& ds, const tp_worker_ctx_t* ctx) {
  if (!ds.augment) return false;
  // PLG-2: read `seed` only when the host's struct is large enough to hold it.
  if (ctx == nullptr || ctx->struct_size < offsetof(tp_worker_ctx_t, seed) + sizeof(uint64_t))
    throw Failure(TP_ERR_INVALID_ARGUMENT, "shapes: augment needs a tp_worker_ctx_t with a seed");
  return (shapes::mix64(ctx->seed) & 1u) != 0;
}

/* tp.dataset/1 */

tp_status shapes_create(const tp_host_t* host, const tp_config_t* raw_cfg, const char* split,
                        void** out_self) {
  TP_GUARD(host, {
    if (out_self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "shapes: out_self is NULL");
    *out_self = nullptr;
    const std::string name = split != nullptr ? split : "(null)";
    uint32_t split_id = 0;
    if (name == "train") split_id = shapes::kSplitTrain;
    else if (name == "val") split_id = shapes::kSplitVal;
    else
      throw Failure(TP_ERR_INVALID_ARGUMENT,
                    "shapes: unknown split '" + name + "' (expected \"train\" or \"val\")");

    const tp::cpp::ConfigReader cfg(raw_cfg);
    const int64_t train_count = read_int_in(cfg, "size", 1, int64_t{1} << 40);
    const int64_t val_count = read_int_in(cfg, "val_size", 1, int64_t{1} << 40);
    const double noise = cfg.get_float("noise");
    if (!(noise >= 0.0 && noise <= 1.0))
      throw Failure(TP_ERR_CONFIG, "shapes: noise = " + std::to_string(noise) + " is outside [0, 1]");

    // Owned until the last read succeeded: any of them may throw.
    auto ds = std::make_unique<ShapesDataset>();
    ds->host = host;
    ds->split = split_id;
    ds->count = static_cast<uint64_t>(split_id == shapes::kSplitTrain ? train_count : val_count);
    ds->seed = cfg.get_int("seed");
    ds->augment = split_id == shapes::kSplitTrain && cfg.get_bool("augment");
    ds->options.image_size = static_cast<int>(read_int_in(cfg, "image_size", 16, 1024));
    ds->options.noise = static_cast<float>(noise);
    *out_self = ds.release();
    return TP_OK;
  });
}

void shapes_destroy(void* self) {
  // Handed-out tensors own their buffers (make_field), so nothing here outlives `self` (PLG-13).
  delete static_cast<ShapesDataset*>(self);
}

tp_status shapes_size(const void* self, uint64_t* out_count) {
  TP_GUARD(host_of(self), {
    if (out_count == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "shapes: out_count is NULL");
    *out_count = as_dataset(self).count;
    return TP_OK;
  });
}

tp_status shapes_get_sample(const void* self, uint64_t index, const tp_worker_ctx_t* ctx,
                            tp_field_t* out_fields, uint32_t capacity, uint32_t* out_count) {
  TP_GUARD(host_of(self), {
    const ShapesDataset& ds = as_dataset(self);
    if (out_fields == nullptr || out_count == nullptr)
      throw Failure(TP_ERR_INVALID_ARGUMENT, "shapes: out_fields or out_count is NULL");
    *out_count = 0;
    if (index >= ds.count)
      throw Failure(TP_ERR_OUT_OF_RANGE, "shapes: index " + std::to_string(index) + " is out of range for " +
                                             (ds.split == shapes::kSplitTrain ? "train" : "val") +
                                             " (size " + std::to_string(ds.count) + ")");
    if (capacity < kFieldCount)
      throw Failure(TP_ERR_INVALID_ARGUMENT, "shapes: capacity " + std::to_string(capacity) + " < " +
                                                 std::to_string(kFieldCount) + " fields");
    const bool flip = flip_for(ds, ctx);
    pin_opencv_threads();

    const int s = ds.options.image_size;
    shapes::Sample sample = shapes::render_sample(shapes::sample_key(ds.seed, ds.split, index), ds.options);
    if (flip) shapes::flip_horizontal(sample, s);

    // Built into a local array first: if an allocation throws, the fields made so far are
    // released here and the host receives none (dataset.h: on error no field is handed over).
    tp_field_t made[kFieldCount] = {};
    uint32_t n = 0;
    const auto add = [&](tp_field_t field) { made[n++] = field; };
    try {
      add(tp::cpp::make_field(kFieldNames[0], std::move(sample.image), {3, s, s}));
      add(tp::cpp::make_field(kFieldNames[1], std::vector<int64_t>{sample.label}, {}));
      std::vector<float> bbox(sample.bbox.begin(), sample.bbox.end());
      add(tp::cpp::make_field(kFieldNames[2], std::move(bbox), {4}));
      add(tp::cpp::make_field(kFieldNames[3], std::move(sample.mask), {1, s, s}));
      add(tp::cpp::make_field(kFieldNames[4], std::move(sample.image2), {3, s, s}));
    } catch (...) {
      tp::cpp::release_fields(made, n);
      throw;
    }
    std::memcpy(out_fields, made, sizeof(made));
    *out_count = kFieldCount;
    return TP_OK;
  });
}

const tp_dataset_v1_t kDatasetTable = {
    sizeof(tp_dataset_v1_t), &shapes_create,     &shapes_destroy, &shapes_size,
    &shapes_get_sample,      /*set_epoch=*/nullptr,
};

const tp::cpp::Component kComponents[] = {
    {&kDescriptor, TP_IFACE_DATASET_V1, &kDatasetTable},
};

}  // namespace

TP_DEFINE_PLUGIN("shapes", TP_STABLE_BUILD_INFO_INIT, kComponents)
