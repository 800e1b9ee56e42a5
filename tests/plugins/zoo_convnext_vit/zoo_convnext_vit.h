// Test support for convnext.so and vit.so: configs giving every key, the committed torchvision
// table (torchvision_state.txt, written by torchvision_oracle.py table), Python dicts written by
// the oracle, and one training step through the C ABI.
//
// Include this first: LibTorch must come before doctest (plugin_harness.h says why).
#pragma once

#include "plugins/models/zoo_model.h"
#include "support/test_paths.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace tp::test::zoo {

using Config = std::map<std::string, FakeConfig::Value>;

constexpr const char* kConvNeXt = "convnext";
constexpr const char* kConvNeXtId = "org.torchhost.convnext";
constexpr const char* kViT = "vit";
constexpr const char* kViTId = "org.torchhost.vit";

/// Every key of org.torchhost.convnext; stochastic_depth_prob -1 is the variant's default.
inline Config convnext_config(const std::string& variant, int64_t classes = 1000, double stochastic_depth_prob = -1.0,
                              int64_t in_channels = 3) {
  return {{"variant", variant},         {"num_classes", classes},
          {"in_channels", in_channels}, {"stochastic_depth_prob", stochastic_depth_prob},
          {"layer_scale", 1e-6},        {"input", std::string("image")}};
}

/// Every key of org.torchhost.vit.
inline Config vit_config(const std::string& variant, int64_t image_size = 224, int64_t classes = 1000,
                         double dropout = 0.0, double attention_dropout = 0.0, double drop_path = 0.0) {
  return {{"variant", variant},     {"image_size", image_size},
          {"num_classes", classes}, {"in_channels", int64_t{3}},
          {"dropout", dropout},     {"attention_dropout", attention_dropout},
          {"drop_path", drop_path}, {"input", std::string("image")}};
}

/// "<shape>" as the table writes it: "96,3,4,4", "-" for a scalar.
inline std::string shape_key(at::IntArrayRef sizes) {
  std::string out;
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? "," : "") + std::to_string(sizes[i]);
  return out.empty() ? "-" : out;
}

/// One model of the table: its state_dict in order ("<p|b> <name> <shape>" lines), parameter
/// count and (ConvNeXt) each block's stochastic-depth rate.
struct TableModel {
  int64_t parameter_count = 0;
  std::vector<std::string> state;                      // "<p|b> <name> <shape>"
  std::vector<std::pair<std::string, double>> drop;    // CNBlock prefix, rate
};

/// torchvision_state.txt by "<family> <variant>", in file order.
inline std::vector<std::pair<std::string, TableModel>> read_table() {
  const std::filesystem::path file =
      std::filesystem::path(tp::test::source_dir()) / "tests/plugins/zoo_convnext_vit/torchvision_state.txt";
  std::ifstream in(file);
  REQUIRE_MESSAGE(in.good(), file.string());
  std::vector<std::pair<std::string, TableModel>> models;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string kind, a, b, c;
    f >> kind >> a >> b;
    if (kind == "model") {
      f >> c;
      models.emplace_back(a + " " + b, TableModel{});
      models.back().second.parameter_count = std::stoll(c);
    } else if (kind == "sd") {
      models.back().second.drop.emplace_back(a, std::stod(b));
    } else {
      models.back().second.state.push_back(line);
    }
  }
  return models;
}

/// One training-mode step through the C ABI: the logits, then every parameter's gradient of
/// cross_entropy(logits, labels), in state order. Gradients accumulate: use a fresh model.
inline std::vector<at::Tensor> train_step(ZooModel& m, const at::Tensor& x, const at::Tensor& labels) {
  m.train(true);
  Fields in = {{"image", x}};
  const at::Tensor logits = m.forward(in).at("logits");
  at::cross_entropy_loss(logits, labels).backward();
  std::vector<at::Tensor> out = {logits.detach()};
  for (const auto& e : m.state()) {
    if (e.is_buffer) continue;
    const at::Tensor& t = tensor_of(e.handle);
    REQUIRE_MESSAGE(t.grad().defined(), e.name);
    out.push_back(t.grad().clone());
  }
  return out;
}

/// The layer_depths table entries as (prefix, depth); REQUIREs success.
inline std::vector<std::pair<std::string, uint32_t>> layer_depths(ZooModel& m) {
  REQUIRE(static_cast<bool>(m.t->layer_depths));
  const tp_layer_depth_t* entries = nullptr;
  uint32_t count = 0;
  REQUIRE_MESSAGE(m.t->layer_depths(m.self, &entries, &count) == TP_OK, m.error());
  std::vector<std::pair<std::string, uint32_t>> out;
  for (uint32_t i = 0; i < count; ++i) out.emplace_back(entries[i].prefix, entries[i].depth);
  return out;
}

/// The names of the parameters no prefix of `depths` claims (a prefix claims whole dotted
/// components: "features.1" claims "features.1.0.layer_scale", not "features.10.x").
inline std::vector<std::string> unclaimed(ZooModel& m, const std::vector<std::pair<std::string, uint32_t>>& depths) {
  std::vector<std::string> out;
  for (const auto& e : m.state()) {
    bool claimed = false;
    for (const auto& [prefix, depth] : depths)
      claimed = claimed || e.name == prefix || e.name.rfind(prefix + ".", 0) == 0;
    if (!claimed) out.push_back(e.name);
  }
  return out;
}

}  // namespace tp::test::zoo
