// Test support for efficientnet.so: the two components' configs, one training step through the C
// ABI, and the Python fixtures of efficientnet_oracle.py.
//
// Include this first: LibTorch must come before doctest (plugin_harness.h says why).
#pragma once

#include "plugins/models/zoo_model.h"

#include <torch/csrc/jit/serialization/pickle.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace tp::test {

using ZooConfig = std::map<std::string, FakeConfig::Value>;

inline constexpr const char* kEfficientNetLibrary = "efficientnet";
inline constexpr const char* kEfficientNetId = "org.torchhost.efficientnet";
inline constexpr const char* kMobileNetV3Id = "org.torchhost.mobilenet_v3";

/// Every key of org.torchhost.efficientnet; dropout -1 is the variant's default.
inline ZooConfig efficientnet_config(const std::string& variant, int64_t classes = 1000, double dropout = -1.0,
                                     double stochastic_depth_prob = 0.2, int64_t channels = 3) {
  return {{"variant", variant},         {"num_classes", classes},
          {"in_channels", channels},    {"input", std::string("image")},
          {"dropout", dropout},         {"stochastic_depth_prob", stochastic_depth_prob}};
}

/// Every key of org.torchhost.mobilenet_v3.
inline ZooConfig mobilenet_v3_config(const std::string& variant, int64_t classes = 1000, double dropout = 0.2,
                                     int64_t channels = 3) {
  return {{"variant", variant}, {"num_classes", classes}, {"in_channels", channels},
          {"input", std::string("image")}, {"dropout", dropout}};
}

/// The component id of a table or fixture family name ("efficientnet", "mobilenet_v3").
inline const char* component_id(const std::string& family) {
  return family == "efficientnet" ? kEfficientNetId : kMobileNetV3Id;
}

/// A plain dict of tensors that Python wrote with torch.save.
inline std::map<std::string, at::Tensor> load_python_dict(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), file.string());
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, at::Tensor> out;
  for (const auto& item : torch::jit::pickle_load(bytes).toGenericDict())
    out[item.key().toStringRef()] = item.value().toTensor();
  return out;
}

/// Outputs, then every parameter's gradient, then every buffer after one training step (forward
/// after at::manual_seed(42), cross-entropy, backward) on a [2, 3, size, size] batch, with
/// activation checkpointing on or off.
inline std::vector<at::Tensor> train_step(const char* id, const ZooConfig& config, bool checkpointing, int64_t size) {
  ZooModel m(kEfficientNetLibrary, id, config);
  if (checkpointing) REQUIRE_MESSAGE(m.t->set_activation_checkpointing(m.self, true) == TP_OK, m.error());
  m.train(true);
  at::manual_seed(42);
  Fields in = {{"image", at::randn({2, 3, size, size})}, {"label", at::randint(0, 10, {2}, at::kLong)}};
  const at::Tensor logits = m.forward(in).at("logits");
  CHECK(has_checkpoint_node(logits) == checkpointing);
  at::cross_entropy_loss(logits, in.items[1].second).backward();
  std::vector<at::Tensor> out = {logits.detach()};
  for (const auto& e : m.state()) {
    const at::Tensor& t = tensor_of(e.handle);
    if (e.is_buffer) {
      out.push_back(t.clone());
    } else {
      REQUIRE_MESSAGE(t.grad().defined(), e.name);
      out.push_back(t.grad().clone());
    }
  }
  return out;
}

}  // namespace tp::test
