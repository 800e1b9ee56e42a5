// The `mnist_idx` plugin: component org.torchhost.mnist_idx, a Tier S dataset over IDX image and
// label files (MNIST, Fashion-MNIST, ...; see README.md). This file holds the schema and the
// dataset class (tp/cpp/dataset_adapter.h makes the C ABI shell); idx_file.cpp reads the files.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "idx_file.h"
#include "tp/cpp/dataset_adapter.h"
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

// get_sample only reads: no TP_DESCRIPTOR_SERIAL.
const tp_descriptor_t kDescriptor = tp::cpp::dataset_descriptor(
    "org.torchhost.mnist_idx", "1.0.0",
    "IDX image/label files (MNIST format, optionally .gz): image float32 [1, H, W], label int64", kKeys);

/* Instance */

/// root/name, or root/name.gz when only the compressed file exists.
std::string locate(const std::string& root, const std::string& name) {
  const std::filesystem::path plain = std::filesystem::path(root) / name;
  if (std::filesystem::exists(plain)) return plain.string();
  const std::filesystem::path gz = plain.string() + ".gz";
  if (std::filesystem::exists(gz)) return gz.string();
  throw Failure(TP_ERR_IO, "mnist_idx: neither '" + plain.string() + "' nor its .gz exists; check `root` and the file names");
}

/// One split, all pixels in memory (MNIST train: 47 MB). Immutable after construction.
class MnistDataset {
 public:
  explicit MnistDataset(const tp::cpp::DatasetArgs& args) {
    const tp::cpp::ConfigReader& cfg = args.config;
    const std::string root = cfg.get_string("root");
    const double mean = cfg.get_float("mean"), stdev = cfg.get_float("std");
    if (!(stdev > 0.0)) throw Failure(TP_ERR_CONFIG, "mnist_idx: std must be > 0");
    const std::string images = locate(root, cfg.get_string(args.train() ? "train_images" : "val_images"));
    const std::string labels = locate(root, cfg.get_string(args.train() ? "train_labels" : "val_labels"));
    images_ = idx::read_idx(images, 3);
    labels_ = idx::read_idx(labels, 1);
    if (images_.dims[0] != labels_.dims[0])
      throw Failure(TP_ERR_CONFIG, "mnist_idx: '" + images + "' holds " + std::to_string(images_.dims[0]) +
                                       " images but '" + labels + "' " + std::to_string(labels_.dims[0]) +
                                       " labels; they must belong together");
    for (int v = 0; v < 256; ++v) lut_[v] = static_cast<float>((v / 255.0 - mean) / stdev);
  }

  uint64_t size() const { return labels_.dims[0]; }

  void get_sample(uint64_t index, const tp::cpp::WorkerContext&, tp::cpp::Sample& out) const {
    const uint32_t h = images_.dims[1], w = images_.dims[2];
    const std::size_t n = static_cast<std::size_t>(h) * w;
    std::vector<float> pixels(n);
    const uint8_t* src = images_.data.data() + index * n;
    for (std::size_t i = 0; i < n; ++i) pixels[i] = lut_[src[i]];
    out.add("image", std::move(pixels), {1, int64_t{h}, int64_t{w}});
    out.add("label", std::vector<int64_t>{labels_.data[index]}, {});
  }

 private:
  idx::IdxArray images_;  // [n, h, w]
  idx::IdxArray labels_;  // [n]
  float lut_[256] = {};   // (v / 255 - mean) / std
};

}  // namespace

TP_DEFINE_DATASET_PLUGIN("mnist_idx", MnistDataset, kDescriptor)
