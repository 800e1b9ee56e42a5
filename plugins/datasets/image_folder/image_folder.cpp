// The `image_folder` plugin: component org.torchhost.image_folder, a Tier S dataset of image
// files (root/<class>/*.jpg or a `path,label` CSV) decoded and transformed with OpenCV. This file
// is the C ABI glue: schema, descriptor, the "tp.dataset/1" table and the DLPack field;
// image_listing.cpp finds the files, image_pipeline.cpp makes the pixels.
#include <array>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "image_listing.h"
#include "image_pipeline.h"
#include "opencv_threads.h"
#include "tp/cpp/config.h"
#include "tp/cpp/dlpack.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/plugin.h"
#include "tp/tp.h"

namespace {

using tp::cpp::Failure;
namespace ifo = tp::image_folder;

/* Schema */

const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "root", TP_CFG_PATH, nullptr,
     "train images: root/<class>/<file>; with `csv`, the directory relative paths start from"},
    {sizeof(tp_config_key_t), "csv", TP_CFG_PATH, "\"\"",
     "optional file of `path,label` rows listing the train images instead of class folders"},
    {sizeof(tp_config_key_t), "val_root", TP_CFG_PATH, "\"\"",
     "val images in class folders (same class names); empty: see val_csv, val_split"},
    {sizeof(tp_config_key_t), "val_csv", TP_CFG_PATH, "\"\"", "val images as a `path,label` file"},
    {sizeof(tp_config_key_t), "val_split", TP_CFG_FLOAT, "0.0",
     "without val_root/val_csv: fraction of the train listing held out as val (seeded by split_seed)"},
    {sizeof(tp_config_key_t), "split_seed", TP_CFG_INT, "0", "seed of the val_split choice"},
    {sizeof(tp_config_key_t), "extensions", TP_CFG_STRING_ARRAY,
     "[\".jpg\", \".jpeg\", \".png\", \".bmp\", \".webp\"]", "file endings scanned in class folders (any case)"},
    {sizeof(tp_config_key_t), "resize", TP_CFG_INT_ARRAY, "[]",
     "[s]: shorter side to s; [h, w]: exact size; []: keep (both splits; train ignores it with random_resized_crop)"},
    {sizeof(tp_config_key_t), "center_crop", TP_CFG_INT_ARRAY, "[]", "[s] or [h, w] after resize; []: none"},
    {sizeof(tp_config_key_t), "random_resized_crop", TP_CFG_INT_ARRAY, "[]",
     "train only: [s] or [h, w] output of torchvision's RandomResizedCrop; []: none"},
    {sizeof(tp_config_key_t), "scale", TP_CFG_FLOAT_ARRAY, "[0.08, 1.0]", "random_resized_crop area range"},
    {sizeof(tp_config_key_t), "ratio", TP_CFG_FLOAT_ARRAY, "[0.75, 1.3333333333333333]",
     "random_resized_crop aspect (w/h) range"},
    {sizeof(tp_config_key_t), "hflip", TP_CFG_FLOAT, "0.0", "train only: probability of a horizontal flip"},
    {sizeof(tp_config_key_t), "brightness", TP_CFG_FLOAT, "0.0", "train only: colour jitter, factor in [1-b, 1+b]"},
    {sizeof(tp_config_key_t), "contrast", TP_CFG_FLOAT, "0.0", "train only: colour jitter, factor in [1-c, 1+c]"},
    {sizeof(tp_config_key_t), "saturation", TP_CFG_FLOAT, "0.0", "train only: colour jitter, factor in [1-s, 1+s]"},
    {sizeof(tp_config_key_t), "mean", TP_CFG_FLOAT_ARRAY, "[0.0, 0.0, 0.0]", "RGB mean subtracted after scaling to [0, 1]"},
    {sizeof(tp_config_key_t), "std", TP_CFG_FLOAT_ARRAY, "[1.0, 1.0, 1.0]", "RGB std divided by after the mean"},
    {sizeof(tp_config_key_t), "channels_last", TP_CFG_BOOL, "false",
     "image memory HWC (strides), logical shape still [3, H, W]"},
    {sizeof(tp_config_key_t), "fast_decode", TP_CFG_BOOL, "true",
     "decode JPEGs at 1/2, 1/4, 1/8 scale when the crop is at least that much larger than the output"},
};

const tp_descriptor_t kDescriptor = {
    sizeof(tp_descriptor_t),
    "org.torchhost.image_folder",
    TP_KIND_DATASET,
    TP_TIER_S,
    "1.0.0",
    "image files in class folders or a CSV, decoded and augmented with OpenCV: image, label",
    kKeys,
    static_cast<uint32_t>(std::size(kKeys)),
    nullptr,
    0,
    0,  // get_sample is thread-safe: no TP_DESCRIPTOR_SERIAL
};

/* Instance */

constexpr const char* kImage = "image";
constexpr const char* kLabel = "label";

/// One split. Immutable after create(), so get_sample needs no locking.
struct ImageFolderDataset {
  const tp_host_t* host = nullptr;
  std::string split;
  ifo::Listing listing;
  ifo::TransformOptions transform;
  ifo::OpenCvThreadsPin pin;  // OpenCV single-threaded while this instance lives
};

const ImageFolderDataset& as_dataset(const void* self) {
  if (self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "image_folder: dataset instance is NULL");
  return *static_cast<const ImageFolderDataset*>(self);
}

const tp_host_t* host_of(const void* self) {
  return self != nullptr ? static_cast<const ImageFolderDataset*>(self)->host : tp::cpp::plugin_host();
}

ifo::Size2 read_size(const tp::cpp::ConfigReader& cfg, const char* key, bool allow_short, int* out_short) {
  const std::vector<int64_t> v = cfg.get_int_array(key);
  for (int64_t x : v) {
    if (x < 1 || x > 65535)
      throw Failure(TP_ERR_CONFIG, std::string("image_folder: ") + key + " values must be in [1, 65535], got " +
                                       std::to_string(x));
  }
  if (v.empty()) return {};
  if (v.size() == 1) {
    if (allow_short) {
      *out_short = static_cast<int>(v[0]);
      return {};
    }
    return {static_cast<int>(v[0]), static_cast<int>(v[0])};
  }
  if (v.size() == 2) return {static_cast<int>(v[0]), static_cast<int>(v[1])};
  throw Failure(TP_ERR_CONFIG, std::string("image_folder: ") + key + " must be [] , [s] or [h, w], got " +
                                   std::to_string(v.size()) + " values");
}

std::array<double, 2> read_range(const tp::cpp::ConfigReader& cfg, const char* key) {
  const std::vector<double> v = cfg.get_float_array(key);
  if (v.size() != 2 || !(v[0] > 0.0) || !(v[0] <= v[1]))
    throw Failure(TP_ERR_CONFIG, std::string("image_folder: ") + key + " must be [lo, hi] with 0 < lo <= hi");
  return {v[0], v[1]};
}

std::array<float, 3> read_rgb(const tp::cpp::ConfigReader& cfg, const char* key, bool positive) {
  const std::vector<double> v = cfg.get_float_array(key);
  if (v.size() != 3)
    throw Failure(TP_ERR_CONFIG, std::string("image_folder: ") + key + " needs 3 values (R, G, B), got " +
                                     std::to_string(v.size()));
  for (double x : v)
    if (positive && !(x > 0.0)) throw Failure(TP_ERR_CONFIG, std::string("image_folder: ") + key + " values must be > 0");
  return {static_cast<float>(v[0]), static_cast<float>(v[1]), static_cast<float>(v[2])};
}

double read_unit(const tp::cpp::ConfigReader& cfg, const char* key, double hi) {
  const double v = cfg.get_float(key);
  if (!(v >= 0.0 && v <= hi))
    throw Failure(TP_ERR_CONFIG, std::string("image_folder: ") + key + " = " + std::to_string(v) + " is outside [0, " +
                                     std::to_string(hi) + "]");
  return v;
}

ifo::TransformOptions read_transform(const tp::cpp::ConfigReader& cfg, bool train) {
  ifo::TransformOptions t;
  t.resize = read_size(cfg, "resize", true, &t.resize_short);
  t.center_crop = read_size(cfg, "center_crop", false, nullptr);
  t.random_resized_crop = read_size(cfg, "random_resized_crop", false, nullptr);
  t.scale = read_range(cfg, "scale");
  if (t.scale[1] > 1.0) throw Failure(TP_ERR_CONFIG, "image_folder: scale must lie in (0, 1]");
  t.ratio = read_range(cfg, "ratio");
  t.hflip = read_unit(cfg, "hflip", 1.0);
  t.brightness = read_unit(cfg, "brightness", 1e6);
  t.contrast = read_unit(cfg, "contrast", 1e6);
  t.saturation = read_unit(cfg, "saturation", 1e6);
  t.mean = read_rgb(cfg, "mean", false);
  t.std = read_rgb(cfg, "std", true);
  t.channels_last = cfg.get_bool("channels_last");
  t.fast_decode = cfg.get_bool("fast_decode");
  t.random = train;
  // The val split has no random crop: a config with only random_resized_crop would give val
  // images of their natural sizes, which cannot be batched. Say so instead of failing in collate.
  if (!train && t.random_resized_crop.set() && !t.center_crop.set() && !t.resize.set())
    throw Failure(TP_ERR_CONFIG,
                  "image_folder: random_resized_crop applies to the train split only; set `center_crop` (and "
                  "usually `resize`) too, so val images get a fixed size (e.g. resize = [256], center_crop = [224])");
  return t;
}

ifo::Listing read_listing(const std::string& root, const std::string& csv, const std::vector<std::string>& extensions) {
  return csv.empty() ? ifo::scan_folder(root, extensions) : ifo::read_csv_listing(csv, root);
}

ifo::Listing listing_for(const tp::cpp::ConfigReader& cfg, bool train) {
  const std::string root = cfg.get_string("root");
  const std::string csv = cfg.get_string("csv");
  const std::string val_root = cfg.get_string("val_root");
  const std::string val_csv = cfg.get_string("val_csv");
  const double val_split = read_unit(cfg, "val_split", 1.0);
  const std::vector<std::string> extensions = cfg.get_string_array("extensions");
  const bool separate_val = !val_root.empty() || !val_csv.empty();
  if (separate_val && val_split > 0.0)
    throw Failure(TP_ERR_CONFIG, "image_folder: set either val_root/val_csv or val_split, not both");
  if (root.empty()) throw Failure(TP_ERR_CONFIG, "image_folder: `root` is empty; set it to the image directory");
  if (val_split > 0.0) {
    auto parts = ifo::split_listing(read_listing(root, csv, extensions), val_split,
                                    static_cast<uint64_t>(cfg.get_int("split_seed")));
    return train ? std::move(parts.first) : std::move(parts.second);
  }
  if (train || !separate_val) {
    if (!train)
      throw Failure(TP_ERR_CONFIG,
                    "image_folder: the val split needs `val_root`, `val_csv` or `val_split` > 0 (or set "
                    "eval.strategy = \"no\")");
    return read_listing(root, csv, extensions);
  }
  ifo::Listing val = read_listing(val_root.empty() ? root : val_root, val_csv, extensions);
  if (val_csv.empty() && csv.empty()) {
    // Class ids come from folder names; the val folders must name the same classes.
    ifo::Listing train_listing = read_listing(root, csv, extensions);
    if (train_listing.classes != val.classes)
      throw Failure(TP_ERR_CONFIG, "image_folder: val_root '" + val_root + "' has " + std::to_string(val.classes.size()) +
                                       " class folders that differ from root's " +
                                       std::to_string(train_listing.classes.size()) +
                                       "; both need the same class sub-folders so labels agree");
  }
  return val;
}

/// A DLPack [3, h, w] float tensor owning `pixels`; HWC memory (strides {1, 3w, 3}) when
/// channels_last, compact CHW otherwise.
struct OwnedImage {
  DLManagedTensor managed{};
  std::vector<float> pixels;
  int64_t shape[3];
  int64_t strides[3];
};

void delete_image(DLManagedTensor* t) { delete static_cast<OwnedImage*>(t->manager_ctx); }

tp_field_t make_image_field(ifo::Image&& image, bool channels_last) {
  auto owned = std::make_unique<OwnedImage>();
  owned->pixels = std::move(image.pixels);
  owned->shape[0] = 3;
  owned->shape[1] = image.h;
  owned->shape[2] = image.w;
  owned->strides[0] = 1;
  owned->strides[1] = 3 * static_cast<int64_t>(image.w);
  owned->strides[2] = 3;
  DLTensor& t = owned->managed.dl_tensor;
  t.data = owned->pixels.data();
  t.device = {kDLCPU, 0};
  t.ndim = 3;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = owned->shape;
  t.strides = channels_last ? owned->strides : nullptr;
  t.byte_offset = 0;
  owned->managed.manager_ctx = owned.get();
  owned->managed.deleter = &delete_image;
  return tp_field_t{kImage, &owned.release()->managed};
}

/* tp.dataset/1 */

tp_status image_folder_create(const tp_host_t* host, const tp_config_t* raw_cfg, const char* split,
                              void** out_self) {
  TP_GUARD(host, {
    if (out_self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "image_folder: out_self is NULL");
    *out_self = nullptr;
    const std::string name = split != nullptr ? split : "(null)";
    if (name != "train" && name != "val")
      throw Failure(TP_ERR_INVALID_ARGUMENT, "image_folder: unknown split '" + name + "' (expected \"train\" or \"val\")");
    const bool train = name == "train";
    const tp::cpp::ConfigReader cfg(raw_cfg);
    auto ds = std::make_unique<ImageFolderDataset>();
    ds->host = host;
    ds->split = name;
    ds->transform = read_transform(cfg, train);
    ds->listing = listing_for(cfg, train);
    if (host != nullptr && host->log != nullptr) {
      const std::string line = "image_folder (" + name + "): " + std::to_string(ds->listing.paths.size()) +
                               " images, " + std::to_string(ds->listing.classes.size()) + " classes";
      host->log(host, TP_LOG_INFO, line.c_str());
    }
    *out_self = ds.release();
    return TP_OK;
  });
}

void image_folder_destroy(void* self) {
  // Handed-out tensors own their pixels, so nothing outlives `self` (PLG-13).
  delete static_cast<ImageFolderDataset*>(self);
}

tp_status image_folder_size(const void* self, uint64_t* out_count) {
  TP_GUARD(host_of(self), {
    if (out_count == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "image_folder: out_count is NULL");
    *out_count = as_dataset(self).listing.paths.size();
    return TP_OK;
  });
}

tp_status image_folder_get_sample(const void* self, uint64_t index, const tp_worker_ctx_t* ctx,
                                  tp_field_t* out_fields, uint32_t capacity, uint32_t* out_count) {
  TP_GUARD(host_of(self), {
    const ImageFolderDataset& ds = as_dataset(self);
    if (out_fields == nullptr || out_count == nullptr)
      throw Failure(TP_ERR_INVALID_ARGUMENT, "image_folder: out_fields or out_count is NULL");
    *out_count = 0;
    if (index >= ds.listing.paths.size())
      throw Failure(TP_ERR_OUT_OF_RANGE, "image_folder: index " + std::to_string(index) + " is out of range for " +
                                             ds.split + " (size " + std::to_string(ds.listing.paths.size()) + ")");
    if (capacity < 2) throw Failure(TP_ERR_INVALID_ARGUMENT, "image_folder: capacity " + std::to_string(capacity) + " < 2");
    // PLG-2: read `seed` only when the host's struct is large enough to hold it.
    uint64_t seed = 0;
    if (ctx != nullptr && ctx->struct_size >= offsetof(tp_worker_ctx_t, seed) + sizeof(uint64_t)) seed = ctx->seed;
    else if (ds.transform.random)
      throw Failure(TP_ERR_INVALID_ARGUMENT, "image_folder: train augmentation needs a tp_worker_ctx_t with a seed");

    ifo::Image image = ifo::load_image(ds.listing.paths[index], ds.transform, seed);
    tp_field_t made[2] = {};
    uint32_t n = 0;
    try {
      made[n++] = make_image_field(std::move(image), ds.transform.channels_last);
      made[n++] = tp::cpp::make_field(kLabel, std::vector<int64_t>{ds.listing.labels[index]}, {});
    } catch (...) {
      tp::cpp::release_fields(made, n);
      throw;
    }
    std::memcpy(out_fields, made, sizeof(made));
    *out_count = 2;
    return TP_OK;
  });
}

const tp_dataset_v1_t kDatasetTable = {
    sizeof(tp_dataset_v1_t), &image_folder_create,     &image_folder_destroy, &image_folder_size,
    &image_folder_get_sample, /*set_epoch=*/nullptr,
};

const tp::cpp::Component kComponents[] = {
    {&kDescriptor, TP_IFACE_DATASET_V1, &kDatasetTable},
};

}  // namespace

TP_DEFINE_PLUGIN("image_folder", TP_STABLE_BUILD_INFO_INIT, kComponents)
