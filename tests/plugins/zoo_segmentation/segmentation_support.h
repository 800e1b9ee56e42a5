// Test support for segmentation.so: the component's config, one training step through the C ABI
// with torchvision's reference criterion, and the committed torchvision table.
//
// Include this first: LibTorch must come before doctest (plugin_harness.h says why).
#pragma once

#include "plugins/models/zoo_model.h"
#include "support/test_paths.h"

#include <ATen/ops/cross_entropy_loss.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace tp::test {

using ZooConfig = std::map<std::string, FakeConfig::Value>;

inline constexpr const char* kSegmentationLibrary = "segmentation";
inline constexpr const char* kSegmentationId = "org.torchhost.segmentation";

/// torchvision's four builders, in segmentation_oracle.py's ARCHS order.
inline const std::vector<std::string> kArchs = {"fcn_resnet50", "deeplabv3_resnet50", "deeplabv3_mobilenet_v3_large",
                                                "lraspp_mobilenet_v3_large"};

/// Whether torchvision's builder takes aux_loss (LRASPP does not).
inline bool has_aux(const std::string& arch) { return arch.rfind("lraspp", 0) != 0; }

/// Every key of org.torchhost.segmentation.
inline ZooConfig segmentation_config(const std::string& arch, bool aux_loss, int64_t classes = 21,
                                     int64_t channels = 3) {
  return {{"arch", arch},
          {"num_classes", classes},
          {"in_channels", channels},
          {"aux_loss", aux_loss},
          {"input", std::string("image")}};
}

/// torchvision_table.txt (segmentation_oracle.py table), parsed.
struct SegmentationTable {
  /// arch -> "<name> <shape> <p|b>" in visit order (parameters, then buffers), aux on where it exists.
  std::map<std::string, std::vector<std::string>> entries;
  /// "<arch> <0|1>" (aux off, on) -> parameter count.
  std::map<std::string, int64_t> counts;
};

inline const SegmentationTable& segmentation_table() {
  static const SegmentationTable t = [] {
    SegmentationTable out;
    std::ifstream in(std::string(tp::test::source_dir()) + "/tests/plugins/zoo_segmentation/torchvision_table.txt");
    REQUIRE(in.good());
    for (std::string line; std::getline(in, line);) {
      std::istringstream f(line);
      std::string a, b, c, d;
      f >> a >> b >> c >> d;
      if (a == "count") out.counts[b + " " + c] = std::stoll(d);
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

/// torchvision's references/segmentation criterion: cross_entropy(out) + 0.5 * cross_entropy(aux).
inline at::Tensor segmentation_loss(const std::map<std::string, at::Tensor>& outputs, const at::Tensor& target) {
  at::Tensor loss = at::cross_entropy_loss(outputs.at("out"), target);
  if (outputs.count("aux") != 0) loss = loss + 0.5 * at::cross_entropy_loss(outputs.at("aux"), target);
  return loss;
}

}  // namespace tp::test
