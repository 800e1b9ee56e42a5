// The `mnist_idx` plugin: component org.torchhost.mnist_idx, a Tier S dataset over IDX image and
// label files (MNIST, Fashion-MNIST, ...; see README.md). This file is the C ABI glue;
// idx_file.cpp reads the files.
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "idx_file.h"
#include "tp/cpp/config.h"
#include "tp/cpp/dlpack.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/plugin.h"
#include "tp/tp.h"

namespace {

using tp::cpp::Failure;
namespace idx = tp::mnist_idx;

/* Schema */

const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "root", TP_CFG_PATH, nullptr, "directory holding the IDX files"},
    {sizeof(tp_config_key_t), "train_images", TP_CFG_STRING, "\"train-images-idx3-ubyte\"",
     "train images, relative to root; `<name>.gz` is used when only it exists"},
    {sizeof(tp_config_key_t), "train_labels", TP_CFG_STRING, "\"train-labels-idx1-ubyte\"", "train labels"},
    {sizeof(tp_config_key_t), "val_images", TP_CFG_STRING, "\"t10k-images-idx3-ubyte\"", "val images"},
    {sizeof(tp_config_key_t), "val_labels", TP_CFG_STRING, "\"t10k-labels-idx1-ubyte\"", "val labels"},
    {sizeof(tp_config_key_t), "mean", TP_CFG_FLOAT, "0.0", "subtracted after scaling pixels to [0, 1] (MNIST: 0.1307)"},
    {sizeof(tp_config_key_t), "std", TP_CFG_FLOAT, "1.0", "divided by after the mean (MNIST: 0.3081)"},
};

const tp_descriptor_t kDescriptor = {
    sizeof(tp_descriptor_t),
    "org.torchhost.mnist_idx",
    TP_KIND_DATASET,
    TP_TIER_S,
    "1.0.0",
    "IDX image/label files (MNIST format, optionally .gz): image float32 [1, H, W], label int64",
    kKeys,
    static_cast<uint32_t>(std::size(kKeys)),
    nullptr,
    0,
    0,  // get_sample only reads: no TP_DESCRIPTOR_SERIAL
};

/* Instance */

constexpr const char* kImage = "image";
constexpr const char* kLabel = "label";

/// One split, all pixels in memory (MNIST train: 47 MB). Immutable after create().
struct MnistDataset {
  const tp_host_t* host = nullptr;
  idx::IdxArray images;  // [n, h, w]
  idx::IdxArray labels;  // [n]
  float lut[256];        // (v / 255 - mean) / std
};

const MnistDataset& as_dataset(const void* self) {
  if (self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "mnist_idx: dataset instance is NULL");
  return *static_cast<const MnistDataset*>(self);
}

const tp_host_t* host_of(const void* self) {
  return self != nullptr ? static_cast<const MnistDataset*>(self)->host : tp::cpp::plugin_host();
}

/// root/name, or root/name.gz when only the compressed file exists.
std::string locate(const std::string& root, const std::string& name) {
  const std::filesystem::path plain = std::filesystem::path(root) / name;
  if (std::filesystem::exists(plain)) return plain.string();
  const std::filesystem::path gz = plain.string() + ".gz";
  if (std::filesystem::exists(gz)) return gz.string();
  throw Failure(TP_ERR_IO, "mnist_idx: neither '" + plain.string() + "' nor its .gz exists; check `root` and the file names");
}

/* tp.dataset/1 */

tp_status mnist_create(const tp_host_t* host, const tp_config_t* raw_cfg, const char* split, void** out_self) {
  TP_GUARD(host, {
    if (out_self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "mnist_idx: out_self is NULL");
    *out_self = nullptr;
    const std::string name = split != nullptr ? split : "(null)";
    if (name != "train" && name != "val")
      throw Failure(TP_ERR_INVALID_ARGUMENT, "mnist_idx: unknown split '" + name + "' (expected \"train\" or \"val\")");
    const tp::cpp::ConfigReader cfg(raw_cfg);
    const std::string root = cfg.get_string("root");
    const double mean = cfg.get_float("mean"), stdev = cfg.get_float("std");
    if (!(stdev > 0.0)) throw Failure(TP_ERR_CONFIG, "mnist_idx: std must be > 0");
    auto ds = std::make_unique<MnistDataset>();
    ds->host = host;
    const std::string images = locate(root, cfg.get_string(name == "train" ? "train_images" : "val_images"));
    const std::string labels = locate(root, cfg.get_string(name == "train" ? "train_labels" : "val_labels"));
    ds->images = idx::read_idx(images, 3);
    ds->labels = idx::read_idx(labels, 1);
    if (ds->images.dims[0] != ds->labels.dims[0])
      throw Failure(TP_ERR_CONFIG, "mnist_idx: '" + images + "' holds " + std::to_string(ds->images.dims[0]) +
                                       " images but '" + labels + "' " + std::to_string(ds->labels.dims[0]) +
                                       " labels; they must belong together");
    for (int v = 0; v < 256; ++v)
      ds->lut[v] = static_cast<float>((v / 255.0 - mean) / stdev);
    *out_self = ds.release();
    return TP_OK;
  });
}

void mnist_destroy(void* self) { delete static_cast<MnistDataset*>(self); }

tp_status mnist_size(const void* self, uint64_t* out_count) {
  TP_GUARD(host_of(self), {
    if (out_count == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "mnist_idx: out_count is NULL");
    *out_count = as_dataset(self).labels.dims[0];
    return TP_OK;
  });
}

tp_status mnist_get_sample(const void* self, uint64_t index, const tp_worker_ctx_t* ctx, tp_field_t* out_fields,
                           uint32_t capacity, uint32_t* out_count) {
  TP_GUARD(host_of(self), {
    const MnistDataset& ds = as_dataset(self);
    if (out_fields == nullptr || out_count == nullptr)
      throw Failure(TP_ERR_INVALID_ARGUMENT, "mnist_idx: out_fields or out_count is NULL");
    *out_count = 0;
    if (index >= ds.labels.dims[0])
      throw Failure(TP_ERR_OUT_OF_RANGE, "mnist_idx: index " + std::to_string(index) + " is out of range (size " +
                                             std::to_string(ds.labels.dims[0]) + ")");
    if (capacity < 2) throw Failure(TP_ERR_INVALID_ARGUMENT, "mnist_idx: capacity " + std::to_string(capacity) + " < 2");
    const uint32_t h = ds.images.dims[1], w = ds.images.dims[2];
    const std::size_t n = static_cast<std::size_t>(h) * w;
    std::vector<float> pixels(n);
    const uint8_t* src = ds.images.data.data() + index * n;
    for (std::size_t i = 0; i < n; ++i) pixels[i] = ds.lut[src[i]];
    tp_field_t made[2] = {};
    uint32_t count = 0;
    try {
      made[count++] = tp::cpp::make_field(kImage, std::move(pixels), {1, int64_t{h}, int64_t{w}});
      made[count++] = tp::cpp::make_field(kLabel, std::vector<int64_t>{ds.labels.data[index]}, {});
    } catch (...) {
      tp::cpp::release_fields(made, count);
      throw;
    }
    std::memcpy(out_fields, made, sizeof(made));
    *out_count = 2;
    return TP_OK;
  });
}

const tp_dataset_v1_t kDatasetTable = {
    sizeof(tp_dataset_v1_t), &mnist_create, &mnist_destroy, &mnist_size, &mnist_get_sample, /*set_epoch=*/nullptr,
};

const tp::cpp::Component kComponents[] = {
    {&kDescriptor, TP_IFACE_DATASET_V1, &kDatasetTable},
};

}  // namespace

TP_DEFINE_PLUGIN("mnist_idx", TP_STABLE_BUILD_INFO_INIT, kComponents)
