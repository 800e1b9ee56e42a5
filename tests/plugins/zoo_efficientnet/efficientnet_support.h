// Test support for efficientnet.so: the two components' configs, one training step through the C
// ABI, and the Python fixtures of efficientnet_oracle.py.
//
// Include this first: LibTorch must come before doctest (plugin_harness.h says why).
#pragma once

#include "plugins/models/zoo_model.h"

#include <cstdint>
#include <filesystem>
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
                                     double stochastic_depth_prob = 0.2, int64_t channels = 3, bool fused_norm = false) {
  return {{"variant", variant},      {"num_classes", classes},
          {"in_channels", channels}, {"input", std::string("image")},
          {"dropout", dropout},      {"stochastic_depth_prob", stochastic_depth_prob},
          {"fused_norm", fused_norm}};
}

/// Every key of org.torchhost.mobilenet_v3.
inline ZooConfig mobilenet_v3_config(const std::string& variant, int64_t classes = 1000, double dropout = 0.2,
                                     int64_t channels = 3, bool fused_norm = false) {
  return {{"variant", variant},         {"num_classes", classes}, {"in_channels", channels},
          {"input", std::string("image")}, {"dropout", dropout},    {"fused_norm", fused_norm}};
}

/// The component id of a table or fixture family name ("efficientnet", "mobilenet_v3").
inline const char* component_id(const std::string& family) {
  return family == "efficientnet" ? kEfficientNetId : kMobileNetV3Id;
}

}  // namespace tp::test
