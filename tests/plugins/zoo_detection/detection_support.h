// Test support for detection.so: org.torchhost.fcos's configs, the loss org.torchhost.fcos_loss
// through the C ABI, a padded batch of images with ragged boxes, and the committed torchvision
// table.
//
// Include this first: LibTorch must come before doctest (plugin_harness.h says why).
#pragma once

#include "plugins/models/zoo_model.h"
#include "support/test_paths.h"

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace tp::test {

using ZooConfig = std::map<std::string, FakeConfig::Value>;

inline constexpr const char* kDetectionLibrary = "detection";
inline constexpr const char* kFcosId = "org.torchhost.fcos";
inline constexpr const char* kFcosLossId = "org.torchhost.fcos_loss";

/// A config of detection_oracle.py's CONFIGS.
struct FcosShape {
  std::string backbone;
  int64_t num_classes;
  int64_t fpn_channels;
  int64_t head_convs;
};

/// detection_oracle.py's CONFIGS, by name.
inline const std::map<std::string, FcosShape>& fcos_shapes() {
  static const std::map<std::string, FcosShape> shapes = {{"resnet50", {"resnet50", 91, 256, 4}},
                                                          {"resnet34", {"resnet34", 91, 256, 4}},
                                                          {"resnet18", {"resnet18", 91, 256, 4}},
                                                          {"small", {"resnet18", 5, 64, 2}}};
  return shapes;
}

/// Every key of org.torchhost.fcos: `shape` and torchvision's post-processing defaults.
inline ZooConfig fcos_config(const FcosShape& shape, int64_t in_channels = 3) {
  return {{"backbone", shape.backbone},   {"num_classes", shape.num_classes}, {"in_channels", in_channels},
          {"fpn_channels", shape.fpn_channels}, {"head_convs", shape.head_convs}, {"score_thresh", 0.2},
          {"nms_thresh", 0.6},            {"detections_per_img", int64_t{100}}, {"topk_candidates", int64_t{1000}},
          {"input", std::string("image")}, {"orig_size", std::string("orig_size")}};
}

/// The small CPU config of the tests: ResNet-18, a 64-wide pyramid, 2-conv head, `classes` classes.
inline ZooConfig small_config(int64_t classes = 5) { return fcos_config({"resnet18", classes, 64, 2}); }

/// An org.torchhost.fcos_loss instance with the descriptor's defaults plus `overrides`. Creation
/// failures are REQUIREd unless `expect_ok` is false (then `status` and `error()` tell).
struct FcosLossInstance {
  LoadedPlugin& p = plugin(kDetectionLibrary);
  const tp_loss_v1_t* t = nullptr;
  void* self = nullptr;
  tp_status status = TP_OK;

  explicit FcosLossInstance(const std::map<std::string, FakeConfig::Value>& overrides = {}, bool expect_ok = true) {
    t = &p.table<tp_loss_v1_t>(kFcosLossId, TP_IFACE_LOSS_V1);
    FakeConfig cfg;
    fill_defaults(cfg, p.descriptor(kFcosLossId));
    for (const auto& [k, v] : overrides) cfg.values[k] = v;
    status = t->create(&p.host.host, &cfg.view, &self);
    if (expect_ok) REQUIRE_MESSAGE(status == TP_OK, p.host.last_error);
  }
  ~FcosLossInstance() { t->destroy(self); }
  FcosLossInstance(const FcosLossInstance&) = delete;
  FcosLossInstance& operator=(const FcosLossInstance&) = delete;

  const std::string& error() const { return p.host.last_error; }

  /// forward's status; {sum, count} into `result` on success.
  tp_status try_forward(Fields& outputs, Fields& targets, std::pair<at::Tensor, at::Tensor>& result) {
    tp_tensor sum = nullptr, count = nullptr;
    const tp_status s = t->forward(self, outputs.view(), outputs.size(), targets.view(), targets.size(), &sum, &count);
    if (s == TP_OK) result = {adopt(p, sum), adopt(p, count)};
    return s;
  }
  /// {sum, count}; REQUIREs success.
  std::pair<at::Tensor, at::Tensor> forward(Fields& outputs, Fields& targets) {
    std::pair<at::Tensor, at::Tensor> result;
    REQUIRE_MESSAGE(try_forward(outputs, targets, result) == TP_OK, p.host.last_error);
    return result;
  }
  /// The named terms of the last forward, name -> detached sum.
  std::map<std::string, at::Tensor> terms() {
    REQUIRE((t->terms != nullptr));
    tp_named_tensor_t named[8] = {};
    uint32_t n = 0;
    REQUIRE_MESSAGE(t->terms(self, named, 8, &n) == TP_OK, p.host.last_error);
    std::map<std::string, at::Tensor> out;
    for (uint32_t i = 0; i < n; ++i) out[named[i].name] = adopt(p, named[i].tensor);
    return out;
  }
};

/// An int64 tensor of `values` (at::tensor's braced overloads are ambiguous for int64_t).
inline at::Tensor longs(std::vector<int64_t> values) { return at::tensor(values, at::kLong); }

/// The model's training outputs the loss reads, as loss outputs.
inline Fields loss_outputs(const std::map<std::string, at::Tensor>& out) {
  return {{"cls_logits", out.at("cls_logits")},
          {"bbox_regression", out.at("bbox_regression")},
          {"bbox_ctrness", out.at("bbox_ctrness")},
          {"anchors", out.at("anchors")},
          {"num_anchors_per_level", out.at("num_anchors_per_level")}};
}

/// Ragged targets: boxes [sum N_i, 4], labels [sum N_i] and their offsets [B + 1].
inline Fields ragged_targets(const at::Tensor& boxes, const at::Tensor& labels, const at::Tensor& offsets) {
  return {{"boxes", boxes}, {"boxes_offsets", offsets}, {"labels", labels}, {"labels_offsets", offsets}};
}

/// torchvision_table.txt (detection_oracle.py table), parsed.
struct DetectionTable {
  /// config -> "<name> <shape> <p|b>" in visit order (parameters, then buffers).
  std::map<std::string, std::vector<std::string>> entries;
  /// config -> parameter count.
  std::map<std::string, int64_t> counts;
};

inline const DetectionTable& detection_table() {
  static const DetectionTable t = [] {
    DetectionTable out;
    std::ifstream in(std::string(tp::test::source_dir()) + "/tests/plugins/zoo_detection/torchvision_table.txt");
    REQUIRE(in.good());
    for (std::string line; std::getline(in, line);) {
      std::istringstream f(line);
      std::string a, b, c, d;
      f >> a >> b >> c >> d;
      if (a == "count") out.counts[b] = std::stoll(c);
      else out.entries[a].push_back(b + " " + c + " " + d);
    }
    return out;
  }();
  return t;
}

/// "<shape>" as the table writes it: "64,3,7,7", "-" for a scalar.
inline std::string shape_key(at::IntArrayRef sizes) {
  std::string out;
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? "," : "") + std::to_string(sizes[i]);
  return out.empty() ? "-" : out;
}

}  // namespace tp::test
