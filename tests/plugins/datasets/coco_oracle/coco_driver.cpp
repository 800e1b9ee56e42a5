// The C++ side of the torchvision oracle for coco_detection (coco_oracle.py is the other side).
// Drives the built coco_detection.so through its C ABI (tests/support/fake_host.h as the host),
// so the oracle sees what the loader gets, JSON reading included; links the plugin's
// detection_transform.cpp only to print each sample's drawn parameters (a pure function of the
// sample's source size, the options and the seed) for torchvision to replay. No LibTorch.
//   coco_driver <coco_detection.so> <split> <out_dir> <seeds> [key=type:value]...
//   types: i (int), ia (ints a,b,c), f (float), fa (floats), b (bool 0/1), s (string)
// For every sample and `seeds` draws (seed index * 7919 + draw) it writes the image floats to
// out_dir/<index>_<draw>.f32 and prints one JSON line: index, seed, image_id, orig_size, the
// plan (min_size, ScaleJitter's u, flip, size) and the box and ground-truth fields.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "detection_transform.h"
#include "support/driver_config.h"
#include "support/fake_host.h"
#include "tp/iface/dataset.h"

namespace {

using tp::test::FakeConfig;
namespace coco = tp::coco_detection;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "coco_driver: %s\n", what.c_str());
  std::exit(1);
}

/// The options the plugin reads, from the same values (for the plan only).
coco::DetectionOptions options_of(const FakeConfig& cfg, bool train) {
  coco::DetectionOptions o;
  o.min_size.clear();
  for (int64_t s : std::get<std::vector<int64_t>>(cfg.values.at("min_size"))) o.min_size.push_back(static_cast<int>(s));
  o.max_size = static_cast<int>(std::get<int64_t>(cfg.values.at("max_size")));
  const auto& jitter = std::get<std::vector<double>>(cfg.values.at("scale_jitter"));
  o.scale_jitter = {jitter.at(0), jitter.at(1)};
  o.hflip = std::get<double>(cfg.values.at("hflip"));
  o.random = train;
  return o;
}

const DLTensor& field(const std::vector<tp_field_t>& fields, const char* name) {
  for (const tp_field_t& f : fields)
    if (std::string(f.name) == name) return f.tensor->dl_tensor;
  fail(std::string("no field ") + name);
}

int64_t elements(const DLTensor& t) {
  int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.shape[d];
  return n;
}

template <typename T>
std::string json_array(const DLTensor& t, const char* format) {
  std::string out = "[";
  const T* v = static_cast<const T*>(t.data);
  char buf[64];
  for (int64_t i = 0; i < elements(t); ++i) {
    std::snprintf(buf, sizeof buf, format, v[i]);
    out += (i ? "," : "") + std::string(buf);
  }
  return out + "]";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) fail("usage: coco_driver <coco_detection.so> <split> <out_dir> <seeds> [key=type:value]...");
  const std::string split = argv[2], out_dir = argv[3];
  const int seeds = std::atoi(argv[4]);
  FakeConfig cfg;
  for (int k = 5; k < argc; ++k) {
    try {
      tp::test::set_config_arg(cfg, argv[k]);
    } catch (const std::exception& e) {
      fail(e.what());
    }
  }

  tp::test::FakeHost host;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) fail(std::string("dlopen: ") + dlerror());
  const auto* entry = static_cast<const tp_plugin_entry_t*>(dlsym(lib, TP_ENTRY_SYMBOL));
  if (entry == nullptr || entry->init(&host.host) != TP_OK) fail("init failed");
  const auto* table =
      static_cast<const tp_dataset_v1_t*>(entry->get_interface("org.torchhost.coco_detection", TP_IFACE_DATASET_V1));
  if (table == nullptr) fail("no dataset table");
  void* self = nullptr;
  if (table->create(&host.host, &cfg.view, split.c_str(), &self) != TP_OK) fail("create: " + host.last_error);
  uint64_t count = 0;
  if (table->size(self, &count) != TP_OK) fail("size: " + host.last_error);
  const coco::DetectionOptions options = options_of(cfg, split == "train");

  for (uint64_t index = 0; index < count; ++index) {
    for (int draw = 0; draw < seeds; ++draw) {
      // A seed per (sample, draw), as the host gives each sample its own.
      const uint64_t seed = index * 7919 + static_cast<uint64_t>(draw);
      const tp_worker_ctx_t ctx{sizeof(tp_worker_ctx_t), 0, 1, 0, 0, seed};
      std::vector<tp_field_t> fields(16);
      uint32_t n = 0;
      if (table->get_sample(self, index, &ctx, fields.data(), 16, &n) != TP_OK) fail("get_sample: " + host.last_error);
      fields.resize(n);
      const DLTensor& image = field(fields, "image");
      const auto* orig = static_cast<const int64_t*>(field(fields, "orig_size").data);
      const coco::DetectionPlan plan = coco::plan_detection({static_cast<int>(orig[0]), static_cast<int>(orig[1])},
                                                            options, seed);
      const std::string file = std::to_string(index) + "_" + std::to_string(draw) + ".f32";
      std::ofstream(out_dir + "/" + file, std::ios::binary)
          .write(static_cast<const char*>(image.data), static_cast<std::streamsize>(elements(image) * 4));
      std::printf("{\"index\": %llu, \"seed\": %llu, \"file\": \"%s\", \"image_id\": %lld, \"orig_size\": [%lld, %lld], "
                  "\"shape\": [%lld, %lld, %lld], \"plan\": {\"min_size\": %d, \"u\": %.9g, \"flip\": %d, "
                  "\"sized\": [%d, %d]}",
                  static_cast<unsigned long long>(index), static_cast<unsigned long long>(seed), file.c_str(),
                  static_cast<long long>(*static_cast<const int64_t*>(field(fields, "image_id").data)),
                  static_cast<long long>(orig[0]), static_cast<long long>(orig[1]),
                  static_cast<long long>(image.shape[0]), static_cast<long long>(image.shape[1]),
                  static_cast<long long>(image.shape[2]), plan.min_size, static_cast<double>(plan.jitter_u),
                  plan.flip ? 1 : 0, plan.sized.h, plan.sized.w);
      std::printf(", \"boxes\": %s, \"labels\": %s", json_array<float>(field(fields, "boxes"), "%.9g").c_str(),
                  json_array<int64_t>(field(fields, "labels"), "%ld").c_str());
      if (split != "train")
        std::printf(", \"gt_boxes\": %s, \"gt_labels\": %s, \"gt_iscrowd\": %s, \"gt_areas\": %s",
                    json_array<float>(field(fields, "gt_boxes"), "%.9g").c_str(),
                    json_array<int64_t>(field(fields, "gt_labels"), "%ld").c_str(),
                    json_array<int64_t>(field(fields, "gt_iscrowd"), "%ld").c_str(),
                    json_array<float>(field(fields, "gt_areas"), "%.9g").c_str());
      std::printf("}\n");
      for (tp_field_t& f : fields) f.tensor->deleter(f.tensor);
    }
  }
  table->destroy(self);
  if (entry->deinit != nullptr) entry->deinit();
  dlclose(lib);
  return 0;
}
