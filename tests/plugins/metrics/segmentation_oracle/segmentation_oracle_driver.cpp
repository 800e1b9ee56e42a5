// Driver of the segmentation oracle (segmentation_oracle.py): runs basic_losses' cross_entropy
// and weighted_sum (items = "labelled") and basic_metrics' org.torchhost.mean_iou through
// their C ABI on fixed random logits and masks with ignored pixels, and writes the inputs, the
// loss sums, counts and gradients, the metric's confusion matrix and values, for PyTorch's
// F.cross_entropy and torchmetrics to reproduce.
// Usage: segmentation_oracle_driver <basic_losses.so> <basic_metrics.so> <output dir>
#include <ATen/ATen.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "plugins/metrics/abi_oracle_driver.h"
#include "support/fake_host.h"
#include "tp/iface/loss.h"
#include "tp/iface/metric.h"

namespace {

using tp::test::FakeConfig;
using namespace tp::test::oracle;

constexpr int64_t kIgnore = 255;

/// Random [B, H, W] labels in [0, classes) with about a quarter of the pixels set to kIgnore.
at::Tensor random_mask(int64_t b, int64_t h, int64_t w, int64_t classes) {
  const at::Tensor mask = at::randint(classes, {b, h, w}, at::kLong);
  return mask.masked_fill(at::rand({b, h, w}).lt(0.25), kIgnore);
}

/// One loss forward and backward: writes sum, count and the gradient of every output.
void run_loss(Library& lib, const char* id, FakeConfig& cfg, const std::vector<std::pair<std::string, at::Tensor>>& outputs,
              const at::Tensor& mask, const std::string& dir, const std::string& stem, std::ofstream& manifest) {
  const auto* table = static_cast<const tp_loss_v1_t*>(lib.entry->get_interface(id, TP_IFACE_LOSS_V1));
  void* self = nullptr;
  if (table == nullptr || table->create(&lib.host.host, &cfg.view, &self) != TP_OK) fail(std::string(id) + ": " + lib.host.last_error);
  std::vector<at::Tensor> leaves;
  std::vector<tp_named_tensor_t> out_views;
  for (const auto& [name, t] : outputs) leaves.push_back(t.detach().requires_grad_());
  for (size_t i = 0; i < outputs.size(); ++i) out_views.push_back({outputs[i].first.c_str(), handle_of(leaves[i])});
  const tp_named_tensor_t target{"mask", handle_of(mask)};
  tp_tensor sum_handle = nullptr, count_handle = nullptr;
  if (table->forward(self, out_views.data(), static_cast<uint32_t>(out_views.size()), &target, 1, &sum_handle,
                     &count_handle) != TP_OK)
    fail(std::string(id) + " forward: " + lib.host.last_error);
  const at::Tensor sum = *reinterpret_cast<at::Tensor*>(sum_handle);
  const at::Tensor count = *reinterpret_cast<at::Tensor*>(count_handle);
  lib.host.host.tensor_release(&lib.host.host, sum_handle);
  lib.host.host.tensor_release(&lib.host.host, count_handle);
  sum.backward();
  const at::IntArrayRef shape = leaves[0].sizes();
  char head[224];
  std::snprintf(head, sizeof head, "loss %s component %s dtype %s shape %lldx%lldx%lldx%lld sum %.17g count %lld", stem.c_str(),
                id, leaves[0].scalar_type() == at::kDouble ? "float64" : "float32", static_cast<long long>(shape[0]),
                static_cast<long long>(shape[1]), static_cast<long long>(shape[2]), static_cast<long long>(shape[3]),
                sum.item<double>(), static_cast<long long>(count.item<int64_t>()));
  std::snprintf(head + std::strlen(head), sizeof head - std::strlen(head), " label_smoothing %.17g",
                std::get<double>(cfg.values.at("label_smoothing")));
  manifest << head << " mask " << write(mask, dir, stem + "_mask.bin");
  for (size_t i = 0; i < outputs.size(); ++i)
    manifest << " " << outputs[i].first << " " << write(leaves[i].detach(), dir, stem + "_" + outputs[i].first + ".bin")
             << " grad_" << outputs[i].first << " " << write(leaves[i].grad(), dir, stem + "_grad_" + outputs[i].first + ".bin");
  manifest << "\n";
  table->destroy(self);
}

void loss_cases(Library& lib, const std::string& dir, std::ofstream& manifest) {
  constexpr int64_t kB = 4, kC = 6, kH = 11, kW = 13;
  int index = 0;
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    for (const bool all_ignored : {false, true}) {
      at::manual_seed(100 + index);
      const at::Tensor out = at::randn({kB, kC, kH, kW}, at::TensorOptions(dtype)) * 3;
      const at::Tensor aux = at::randn({kB, kC, kH, kW}, at::TensorOptions(dtype)) * 3;
      const at::Tensor mask = all_ignored ? at::full({kB, kH, kW}, kIgnore, at::kLong) : random_mask(kB, kH, kW, kC);
      for (const double smoothing : {0.0, 0.1}) {
        FakeConfig ce;
        ce.values = {{"output", std::string("out")}, {"target", std::string("mask")}, {"label_smoothing", smoothing},
                     {"ignore_index", kIgnore}, {"class_weights", std::vector<double>{}}};
        run_loss(lib, "org.torchhost.cross_entropy", ce, {{"out", out}}, mask, dir,
                 "ce" + std::to_string(index) + (smoothing > 0 ? "_ls" : ""), manifest);
      }
      FakeConfig ws;
      ws.values = {{"losses", std::vector<std::string>{"cross_entropy", "cross_entropy"}},
                   {"outputs", std::vector<std::string>{"out", "aux"}},
                   {"targets", std::vector<std::string>{"mask", "mask"}},
                   {"weights", std::vector<double>{1.0, 0.5}},
                   {"label_smoothing", 0.0},
                   {"beta", 1.0},
                   {"ignore_index", kIgnore},
                   {"items", std::string("labelled")}};
      run_loss(lib, "org.torchhost.weighted_sum", ws, {{"out", out}, {"aux", aux}}, mask, dir,
               "aux" + std::to_string(index), manifest);
      ++index;
    }
  }
}

/// A metric instance; `state()` copies its state tensors, `add_state` adds another's in place
/// through the visited handles, as the host's all-reduce does.
struct Metric {
  Library& lib;
  const tp_metric_v1_t* t = nullptr;
  void* self = nullptr;
  Metric(Library& l, int64_t classes, int64_t ignore_index) : lib(l) {
    t = static_cast<const tp_metric_v1_t*>(lib.entry->get_interface("org.torchhost.mean_iou", TP_IFACE_METRIC_V1));
    FakeConfig cfg;
    cfg.values = {{"output", std::string("out")}, {"target", std::string("mask")}, {"num_classes", classes},
                  {"ignore_index", ignore_index}, {"per_class", true}};
    if (t == nullptr || t->create(&lib.host.host, &cfg.view, &self) != TP_OK || t->to_device(self, TP_DEVICE_CPU, 0) != TP_OK)
      fail("segmentation create: " + lib.host.last_error);
  }
  ~Metric() { t->destroy(self); }
  void update(const at::Tensor& logits, const at::Tensor& mask) {
    const tp_named_tensor_t out{"out", handle_of(logits)}, tgt{"mask", handle_of(mask)};
    if (t->update(self, &out, 1, &tgt, 1) != TP_OK) fail("segmentation update: " + lib.host.last_error);
  }
  std::vector<at::Tensor*> handles() {
    std::vector<at::Tensor*> out;
    t->visit_state(self, [](void* user, const char*, tp_tensor h, bool) {
      static_cast<std::vector<at::Tensor*>*>(user)->push_back(reinterpret_cast<at::Tensor*>(h));
      return tp_status{TP_OK};
    }, &out);
    return out;
  }
  void add_state(Metric& other) {
    const std::vector<at::Tensor*> mine = handles(), theirs = other.handles();
    for (size_t i = 0; i < mine.size(); ++i) mine[i]->add_(*theirs[i]);
  }
  std::string values() { return metric_values(lib, *t, self, "segmentation"); }
};

/// Batches of random logits and masks, accumulated by one instance ("one") and by two "ranks"
/// taking alternate batches, whose states are then summed ("two").
void metric_case(Library& lib, const std::string& name, int64_t classes, int64_t ignore_index, uint64_t seed,
                 const std::string& dir, std::ofstream& manifest) {
  at::manual_seed(seed);
  const int64_t batch_sizes[] = {3, 1, 4, 2};
  Metric one(lib, classes, ignore_index), rank0(lib, classes, ignore_index), rank1(lib, classes, ignore_index);
  manifest << "metric " << name << " classes " << classes << " ignore_index " << ignore_index << " batches";
  for (int i = 0; i < 4; ++i) {
    constexpr int64_t kH = 9, kW = 7;
    at::Tensor logits = at::randn({batch_sizes[i], classes, kH, kW});
    // The last class is never predicted and never a target; the one before it is predicted but
    // never a target (IoU 0, counted in the mean): the cases where IoU definitions differ.
    logits.select(1, classes - 1).fill_(-1e4);
    at::Tensor mask = at::randint(classes - 2, {batch_sizes[i], kH, kW}, at::kLong);
    if (ignore_index == kIgnore) mask.masked_fill_(at::rand({batch_sizes[i], kH, kW}).lt(0.2), kIgnore);
    if (i == 1) mask.fill_(ignore_index);  // an all-ignored batch
    one.update(logits, mask);
    (i % 2 == 0 ? rank0 : rank1).update(logits, mask);
    const std::string stem = name + "_b" + std::to_string(i);
    manifest << " " << write(logits, dir, stem + "_logits.bin") << " " << write(mask, dir, stem + "_mask.bin") << " "
             << batch_sizes[i] << "x" << kH << "x" << kW;
  }
  manifest << " confusion " << write(*one.handles()[0], dir, name + "_confusion.bin");
  rank0.add_state(rank1);
  manifest << " two_confusion " << write(*rank0.handles()[0], dir, name + "_two_confusion.bin") << "\n";
  manifest << "values " << name << " one" << one.values() << "\n";
  manifest << "values " << name << " two" << rank0.values() << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return std::fprintf(stderr, "usage: segmentation_oracle_driver <basic_losses.so> <basic_metrics.so> <dir>\n"), 2;
  Library losses, metrics;
  open(losses, argv[1]);
  open(metrics, argv[2]);
  const std::string dir = argv[3];
  std::ofstream manifest(dir + "/cases.txt");
  loss_cases(losses, dir, manifest);
  metric_case(metrics, "ignore255", 7, kIgnore, 7, dir, manifest);
  metric_case(metrics, "ignore0", 5, 0, 8, dir, manifest);
  return 0;
}
