// Driver of the segmentation losses oracle (segmentation_losses_oracle.py): runs one basic_losses
// component per case through its C ABI on the inputs the Python side wrote, and writes the loss
// sum, the count and the gradient of the sum with respect to the output.
// Usage: segmentation_losses_driver <basic_losses.so> <dir>, where <dir>/cases.txt holds one case
// a line: NAME COMPONENT OUTPUT_SHAPE (2x1x8x8) TARGET_SHAPE TARGET_DTYPE (i64 or f32) then every
// config key as key=T:value, T one of s (string), f (float), i (int), b (bool), I (ints, comma-
// separated), F (floats), S (strings); the output is NAME_out.bin (float32), the target
// NAME_target.bin. Writes <dir>/results.txt (NAME sum count) and NAME_grad.bin (float32).
#include <ATen/ATen.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "plugins/metrics/abi_oracle_driver.h"
#include "support/fake_host.h"
#include "tp/iface/loss.h"

namespace {

using tp::test::FakeConfig;
using namespace tp::test::oracle;

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, sep);) parts.push_back(part);
  return parts;
}

std::vector<int64_t> shape_of(const std::string& text) {
  std::vector<int64_t> shape;
  for (const std::string& d : split(text, 'x')) shape.push_back(std::stoll(d));
  return shape;
}

at::Tensor read(const std::string& path, const std::vector<int64_t>& shape, at::ScalarType dtype) {
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(dtype));
  std::ifstream(path, std::ios::binary).read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
  return t;
}

/// `key=T:value` into the fake config.
void set_key(FakeConfig& cfg, const std::string& item) {
  const auto eq = item.find('=');
  const std::string key = item.substr(0, eq), type = item.substr(eq + 1, 1), value = item.substr(eq + 3);
  if (type == "s") cfg.values[key] = value;
  else if (type == "f") cfg.values[key] = std::stod(value);
  else if (type == "i") cfg.values[key] = static_cast<int64_t>(std::stoll(value));
  else if (type == "b") cfg.values[key] = value == "true";
  else if (type == "I") {
    std::vector<int64_t> v;
    for (const std::string& x : split(value, ',')) v.push_back(std::stoll(x));
    cfg.values[key] = v;
  } else if (type == "F") {
    std::vector<double> v;
    for (const std::string& x : split(value, ',')) v.push_back(std::stod(x));
    cfg.values[key] = v;
  } else if (type == "S") {
    cfg.values[key] = split(value, ',');
  } else {
    fail("unknown key type in " + item);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return std::fprintf(stderr, "usage: segmentation_losses_driver <basic_losses.so> <dir>\n"), 2;
  Library lib;
  open(lib, argv[1]);
  const std::string dir = argv[2];
  std::ifstream cases(dir + "/cases.txt");
  std::ofstream results(dir + "/results.txt");
  for (std::string line; std::getline(cases, line);) {
    const std::vector<std::string> w = split(line, ' ');
    const std::string& name = w.at(0);
    const auto* table = static_cast<const tp_loss_v1_t*>(lib.entry->get_interface(w.at(1).c_str(), TP_IFACE_LOSS_V1));
    if (table == nullptr) fail("no loss " + w.at(1));
    FakeConfig cfg;
    for (std::size_t i = 5; i < w.size(); ++i) set_key(cfg, w[i]);
    void* self = nullptr;
    if (table->create(&lib.host.host, &cfg.view, &self) != TP_OK) fail(name + " create: " + lib.host.last_error);
    const at::Tensor leaf = read(dir + "/" + name + "_out.bin", shape_of(w.at(2)), at::kFloat).requires_grad_();
    const at::Tensor target =
        read(dir + "/" + name + "_target.bin", shape_of(w.at(3)), w.at(4) == "i64" ? at::kLong : at::kFloat);
    const tp_named_tensor_t out{"out", handle_of(leaf)}, tgt{"mask", handle_of(target)};
    tp_tensor sum_handle = nullptr, count_handle = nullptr;
    if (table->forward(self, &out, 1, &tgt, 1, &sum_handle, &count_handle) != TP_OK)
      fail(name + " forward: " + lib.host.last_error);
    const at::Tensor sum = *reinterpret_cast<at::Tensor*>(sum_handle);
    const at::Tensor count = *reinterpret_cast<at::Tensor*>(count_handle);
    lib.host.host.tensor_release(&lib.host.host, sum_handle);
    lib.host.host.tensor_release(&lib.host.host, count_handle);
    sum.backward();
    char text[160];
    std::snprintf(text, sizeof text, "%s %.17g %.17g\n", name.c_str(), sum.item<double>(), count.to(at::kDouble).item<double>());
    results << text;
    write(leaf.grad(), dir, name + "_grad.bin");
    table->destroy(self);
  }
  return 0;
}
