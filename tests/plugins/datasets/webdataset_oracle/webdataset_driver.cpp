// The C++ side of the webdataset oracle (webdataset_oracle.py is the other side). Drives the built
// webdataset.so through its C ABI (tests/support/fake_host.h as the host), so the oracle sees what
// the loader gets, shard listing and tar reading included. No LibTorch, no OpenCV.
//   webdataset_driver <webdataset.so> <split> <out_dir> [key=type:value]...
//   types: i (int), ia (ints a,b,c), f (float), fa (floats), b (bool 0/1), s (string),
//          sa (strings a,b,c)
// Calls prepare (when the plugin has it) and create as the host does, then for every index writes
// the image floats in [3, H, W] order to out_dir/<index>.f32 and prints one JSON line: index,
// label, the image shape and the file. A last line gives the size, the sample groups (ABI 1.10,
// tp_dataset_v1_t::sample_groups; [] when the plugin declares none) and the plugin's log lines.
#include <dlfcn.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "support/driver_config.h"
#include "support/fake_host.h"
#include "tp/iface/dataset.h"

namespace {

using tp::test::FakeConfig;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "webdataset_driver: %s\n", what.c_str());
  std::exit(1);
}

const DLTensor& field(const std::vector<tp_field_t>& fields, const char* name) {
  for (const tp_field_t& f : fields)
    if (std::string(f.name) == name) return f.tensor->dl_tensor;
  fail(std::string("no field ") + name);
}

/// The float32 image in logical [3, H, W] order, whatever its strides (channels_last gives HWC).
std::vector<float> chw_floats(const DLTensor& t) {
  if (t.ndim != 3 || t.dtype.code != kDLFloat || t.dtype.bits != 32) fail("image is not a float32 [3, H, W] tensor");
  const int64_t c = t.shape[0], h = t.shape[1], w = t.shape[2];
  const int64_t sc = t.strides != nullptr ? t.strides[0] : h * w, sh = t.strides != nullptr ? t.strides[1] : w,
                sw = t.strides != nullptr ? t.strides[2] : 1;
  const auto* base = reinterpret_cast<const float*>(static_cast<const char*>(t.data) + t.byte_offset);
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(c * h * w));
  for (int64_t k = 0; k < c; ++k)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) out.push_back(base[k * sc + y * sh + x * sw]);
  return out;
}

/// `text` as a JSON string.
std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += std::string("\\") + c;
    else if (static_cast<unsigned char>(c) < 0x20) out += ' ';
    else out += c;
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) fail("usage: webdataset_driver <webdataset.so> <split> <out_dir> [key=type:value]...");
  const std::string split = argv[2], out_dir = argv[3];
  FakeConfig cfg;
  for (int k = 4; k < argc; ++k) {
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
      static_cast<const tp_dataset_v1_t*>(entry->get_interface("org.torchhost.webdataset", TP_IFACE_DATASET_V1));
  if (table == nullptr) fail("no dataset table");
  // Optional members only where the table is long enough to hold them (PLG-2).
  const auto fits = [table](std::size_t offset) { return offset + sizeof(void*) <= table->struct_size; };
  if (fits(offsetof(tp_dataset_v1_t, prepare)) && table->prepare != nullptr &&
      table->prepare(&host.host, &cfg.view, split.c_str()) != TP_OK)
    fail("prepare: " + host.last_error);
  void* self = nullptr;
  if (table->create(&host.host, &cfg.view, split.c_str(), &self) != TP_OK) fail("create: " + host.last_error);
  uint64_t count = 0;
  if (table->size(self, &count) != TP_OK) fail("size: " + host.last_error);

  for (uint64_t index = 0; index < count; ++index) {
    const tp_worker_ctx_t ctx{sizeof(tp_worker_ctx_t), 0, 1, 0, 0, index * 7919};
    std::vector<tp_field_t> fields(16);
    uint32_t n = 0;
    if (table->get_sample(self, index, &ctx, fields.data(), 16, &n) != TP_OK) fail("get_sample: " + host.last_error);
    fields.resize(n);
    const DLTensor& image = field(fields, "image");
    const DLTensor& label = field(fields, "label");
    if (label.ndim != 0 || label.dtype.code != kDLInt || label.dtype.bits != 64) fail("label is not an int64 scalar");
    const std::vector<float> pixels = chw_floats(image);
    const std::string file = std::to_string(index) + ".f32";
    std::ofstream(out_dir + "/" + file, std::ios::binary)
        .write(reinterpret_cast<const char*>(pixels.data()), static_cast<std::streamsize>(pixels.size() * sizeof(float)));
    std::printf("{\"index\": %llu, \"label\": %lld, \"shape\": [%lld, %lld, %lld], \"file\": \"%s\"}\n",
                static_cast<unsigned long long>(index),
                static_cast<long long>(*reinterpret_cast<const int64_t*>(static_cast<const char*>(label.data) +
                                                                         label.byte_offset)),
                static_cast<long long>(image.shape[0]), static_cast<long long>(image.shape[1]),
                static_cast<long long>(image.shape[2]), file.c_str());
    for (tp_field_t& f : fields)
      if (f.tensor->deleter != nullptr) f.tensor->deleter(f.tensor);
  }

  std::string groups = "[";
  if (fits(offsetof(tp_dataset_v1_t, sample_groups)) && table->sample_groups != nullptr) {
    const uint64_t* ends = nullptr;
    uint64_t n = 0;
    if (table->sample_groups(self, &ends, &n) != TP_OK) fail("sample_groups: " + host.last_error);
    for (uint64_t g = 0; g < n; ++g) groups += (g ? ", " : "") + std::to_string(ends[g]);
  }
  std::string logs = "[";
  for (std::size_t k = 0; k < host.logs.size(); ++k) logs += (k ? ", " : "") + json_string(host.logs[k]);
  std::printf("{\"size\": %llu, \"groups\": %s], \"logs\": %s]}\n", static_cast<unsigned long long>(count),
              groups.c_str(), logs.c_str());
  table->destroy(self);
  if (entry->deinit != nullptr) entry->deinit();
  dlclose(lib);
  return 0;
}
