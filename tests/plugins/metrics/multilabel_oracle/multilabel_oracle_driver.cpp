// Driver of the multi-label oracle (multilabel_oracle.py): runs basic_losses'
// org.torchhost.bce_with_logits and basic_metrics' org.torchhost.multilabel through their C ABI on
// fixed random logits and targets, and writes the inputs, the loss sums, counts and gradients and
// the metric's values, for PyTorch's BCEWithLogitsLoss, timm's BinaryCrossEntropy and torchmetrics
// to reproduce.
// Usage: multilabel_oracle_driver <basic_losses.so> <basic_metrics.so> <output dir>
#include <ATen/ATen.h>
#include <dlfcn.h>

#include <cstdio>
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

/// One loss forward and backward: the manifest line names the inputs, sum, count and gradient.
void run_loss(Library& lib, const std::string& stem, double smoothing, const std::vector<double>& pos_weight,
              const at::Tensor& logits, const at::Tensor& target, const std::string& dir, std::ofstream& manifest,
              double threshold = -1.0) {
  const auto* table =
      static_cast<const tp_loss_v1_t*>(lib.entry->get_interface("org.torchhost.bce_with_logits", TP_IFACE_LOSS_V1));
  FakeConfig cfg;
  cfg.values = {{"output", std::string("logits")}, {"target", std::string("label")}, {"label_smoothing", smoothing},
                {"target_threshold", threshold}, {"pos_weight", pos_weight}, {"ignore_index", int64_t{-100}}};
  void* self = nullptr;
  if (table == nullptr || table->create(&lib.host.host, &cfg.view, &self) != TP_OK) fail("bce create: " + lib.host.last_error);
  const at::Tensor leaf = logits.detach().requires_grad_();
  const tp_named_tensor_t out{"logits", handle_of(leaf)}, tgt{"label", handle_of(target)};
  tp_tensor sum_handle = nullptr, count_handle = nullptr;
  if (table->forward(self, &out, 1, &tgt, 1, &sum_handle, &count_handle) != TP_OK) fail("bce forward: " + lib.host.last_error);
  const at::Tensor sum = *reinterpret_cast<at::Tensor*>(sum_handle);
  const at::Tensor count = *reinterpret_cast<at::Tensor*>(count_handle);
  lib.host.host.tensor_release(&lib.host.host, sum_handle);
  lib.host.host.tensor_release(&lib.host.host, count_handle);
  sum.backward();
  char head[200];
  std::snprintf(head, sizeof head, "loss %s shape %lldx%lld sum %.17g count %lld smoothing %.17g threshold %.17g",
                stem.c_str(), static_cast<long long>(logits.size(0)), static_cast<long long>(logits.size(1)),
                sum.item<double>(), static_cast<long long>(count.item<int64_t>()), smoothing, threshold);
  manifest << head << " target_kind " << (target.dim() == 1 ? "index" : target.is_floating_point() ? "float" : "int")
           << " logits " << write(logits, dir, stem + "_logits.bin") << " target "
           << write(target.to(target.dim() == 1 ? at::kLong : at::kFloat), dir, stem + "_target.bin") << " grad "
           << write(leaf.grad(), dir, stem + "_grad.bin") << " pos_weight";
  for (const double w : pos_weight) manifest << " " << w;
  manifest << "\n";
  table->destroy(self);
}

void loss_cases(Library& lib, const std::string& dir, std::ofstream& manifest) {
  constexpr int64_t kB = 6, kL = 5;
  at::manual_seed(31);
  const at::Tensor logits = at::randn({kB, kL}) * 3;
  const at::Tensor multi_hot = at::rand({kB, kL}).lt(0.4).to(at::kFloat);
  run_loss(lib, "plain", 0.0, {}, logits, multi_hot, dir, manifest);
  run_loss(lib, "int_targets", 0.0, {}, logits, multi_hot.to(at::kLong), dir, manifest);
  run_loss(lib, "weighted", 0.0, {1.0, 2.0, 0.5, 3.0, 1.0}, logits, multi_hot, dir, manifest);
  run_loss(lib, "indices_smoothed", 0.1, {}, logits, at::randint(kL, {kB}, at::kLong), dir, manifest);
  // timm's --bce-target-thresh: on smoothed class indices, and on Mixup-like blended targets.
  run_loss(lib, "indices_thresholded", 0.1, {}, logits, at::randint(kL, {kB}, at::kLong), dir, manifest, 0.2);
  const at::Tensor blended = 0.7 * multi_hot + 0.3 * multi_hot.roll(1, 0);
  run_loss(lib, "blended_thresholded", 0.0, {}, logits, blended, dir, manifest, 0.2);
}

/// The metric over four batches; writes every batch and the values.
void metric_case(Library& lib, const std::string& dir, std::ofstream& manifest) {
  constexpr int64_t kL = 6;
  const auto* t = static_cast<const tp_metric_v1_t*>(lib.entry->get_interface("org.torchhost.multilabel", TP_IFACE_METRIC_V1));
  FakeConfig cfg;
  cfg.values = {{"output", std::string("logits")}, {"target", std::string("label")}, {"num_labels", kL}, {"threshold", 0.5}};
  void* self = nullptr;
  if (t == nullptr || t->create(&lib.host.host, &cfg.view, &self) != TP_OK || t->to_device(self, TP_DEVICE_CPU, 0) != TP_OK)
    fail("multilabel create: " + lib.host.last_error);
  at::manual_seed(32);
  const int64_t batch_sizes[] = {5, 1, 7, 3};
  manifest << "metric labels " << kL << " batches";
  for (int i = 0; i < 4; ++i) {
    // Scores rounded to a few values: ties, which average precision must rank as torchmetrics does.
    at::Tensor logits = (at::randn({batch_sizes[i], kL}) * 2).round() / 2;
    at::Tensor target = at::rand({batch_sizes[i], kL}).lt(0.35).to(at::kFloat);
    target.select(1, kL - 1).zero_();  // a label never present: no AP, F1 counted as 0
    target.select(1, 0).fill_(1);      // a label always present
    logits.select(1, 1).fill_(-20);    // a label never predicted
    const tp_named_tensor_t out{"logits", handle_of(logits)}, tgt{"label", handle_of(target)};
    if (t->update(self, &out, 1, &tgt, 1) != TP_OK) fail("multilabel update: " + lib.host.last_error);
    const std::string stem = "metric_b" + std::to_string(i);
    manifest << " " << write(logits, dir, stem + "_logits.bin") << " " << write(target, dir, stem + "_target.bin") << " "
             << batch_sizes[i];
  }
  manifest << "\nvalues" << metric_values(lib, *t, self, "multilabel") << "\n";
  t->destroy(self);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return std::fprintf(stderr, "usage: multilabel_oracle_driver <basic_losses.so> <basic_metrics.so> <dir>\n"), 2;
  Library losses, metrics;
  open(losses, argv[1]);
  open(metrics, argv[2]);
  const std::string dir = argv[3];
  std::ofstream manifest(dir + "/cases.txt");
  loss_cases(losses, dir, manifest);
  metric_case(metrics, dir, manifest);
  return 0;
}
