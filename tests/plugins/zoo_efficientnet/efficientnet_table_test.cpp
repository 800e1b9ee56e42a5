// efficientnet.so through its C ABI against torchvision_table.txt, which efficientnet_oracle.py
// wrote from torchvision 0.29.1 itself (zoo_efficientnet_oracle checks it is still current):
// every variant's state names, shapes, kinds and their order, parameter counts (and torchvision's
// published ones), the stochastic depth probability of every MBConv block, layer depths, config
// validation, forward shapes and initialisation. No Python needed.
#include "zoo_efficientnet/efficientnet_support.h"

#include <cmath>
#include <set>
#include <sstream>

#include "efficientnet_net.h"
#include "support/test_paths.h"

namespace {

using namespace tp::test;

/// torchvision_table.txt, parsed.
struct Table {
  /// "<family> <variant>" -> "<name> <shape> <p|b>" in visit order (parameters, then buffers).
  std::map<std::string, std::vector<std::string>> entries;
  std::map<std::string, int64_t> counts;
  /// variant -> (block prefix, stochastic depth probability) at stochastic_depth_prob 0.2.
  std::map<std::string, std::vector<std::pair<std::string, double>>> sd;
};

const Table& table() {
  static const Table t = [] {
    Table out;
    std::ifstream in(std::string(tp::test::source_dir()) + "/tests/plugins/zoo_efficientnet/torchvision_table.txt");
    REQUIRE(in.good());
    for (std::string line; std::getline(in, line);) {
      std::istringstream f(line);
      std::string a, b, c, d, e;
      f >> a >> b >> c >> d;
      if (a == "count") {
        out.counts[b + " " + c] = std::stoll(d);
      } else if (a == "sd") {
        out.sd[b].emplace_back(c, std::stod(d));
      } else {
        f >> e;
        out.entries[a + " " + b].push_back(c + " " + d + " " + e);
      }
    }
    return out;
  }();
  return t;
}

/// "<shape>" as the table writes it: "32,3,3,3", "-" for a scalar.
std::string shape_key(at::IntArrayRef sizes) {
  std::string out;
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? "," : "") + std::to_string(sizes[i]);
  return out.empty() ? "-" : out;
}

ZooConfig default_config(const std::string& family, const std::string& variant) {
  return family == "efficientnet" ? efficientnet_config(variant) : mobilenet_v3_config(variant);
}

TEST_CASE("efficientnet: every variant's state equals torchvision's, name by name and in order") {
  // torchvision's meta["num_params"] of the ImageNet weights.
  const std::map<std::string, int64_t> published = {
      {"efficientnet b0", 5'288'548},  {"efficientnet b1", 7'794'184},  {"efficientnet b2", 9'109'994},
      {"efficientnet b3", 12'233'232}, {"efficientnet b4", 19'341'616}, {"efficientnet b5", 30'389'784},
      {"efficientnet b6", 43'040'704}, {"efficientnet b7", 66'347'960}, {"mobilenet_v3 small", 2'542'856},
      {"mobilenet_v3 large", 5'483'032}};
  REQUIRE(table().entries.size() == published.size());
  for (const auto& [key, expected] : table().entries) {
    CAPTURE(key);
    const std::string family = key.substr(0, key.find(' '));
    const std::string variant = key.substr(key.find(' ') + 1);
    ZooModel m(kEfficientNetLibrary, component_id(family), default_config(family, variant));
    std::vector<std::string> ours;
    for (const auto& e : m.state())
      ours.push_back(e.name + " " + shape_key(tensor_of(e.handle).sizes()) + (e.is_buffer ? " b" : " p"));
    CHECK(ours.size() == expected.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < std::min(ours.size(), expected.size()); ++i) {
      if (ours[i] == expected[i]) continue;
      if (++mismatches <= 5) MESSAGE("entry " << i << ": ours '" << ours[i] << "', torchvision '" << expected[i] << "'");
    }
    CHECK(mismatches == 0);
    const int64_t count = m.parameter_count();
    CHECK(count == table().counts.at(key));
    CHECK(count == published.at(key));
  }
}

TEST_CASE("efficientnet: every block's stochastic depth probability is torchvision's") {
  // efficientnet_stages is what EfficientNet builds its blocks from (compiled into this test).
  REQUIRE(table().sd.size() == 8);
  for (const auto& [variant, blocks] : table().sd) {
    CAPTURE(variant);
    const auto* v = tp::efficientnet::find_efficientnet_variant(variant);
    REQUIRE(v != nullptr);
    std::vector<std::pair<std::string, double>> ours;
    const auto stages = tp::efficientnet::efficientnet_stages(*v, 0.2);
    for (size_t s = 0; s < stages.size(); ++s)
      for (size_t b = 0; b < stages[s].size(); ++b)
        ours.emplace_back("features." + std::to_string(s + 1) + "." + std::to_string(b), stages[s][b].stochastic_depth_prob);
    REQUIRE(ours.size() == blocks.size());
    for (size_t i = 0; i < ours.size(); ++i) {
      CAPTURE(blocks[i].first);
      CHECK(ours[i].first == blocks[i].first);
      CHECK(ours[i].second == blocks[i].second);  // bit-exact: the same double arithmetic
    }
  }
}

TEST_CASE("efficientnet: layer depths through the C table") {
  struct Case {
    const char* family;
    const char* variant;
    std::vector<std::string> prefixes;  // in depth order 0, 1, 2, ...
  };
  std::vector<std::string> b0 = {"features.0"};
  for (auto [stage, blocks] : std::vector<std::pair<int, int>>{{1, 1}, {2, 2}, {3, 2}, {4, 3}, {5, 3}, {6, 4}, {7, 1}})
    for (int b = 0; b < blocks; ++b) b0.push_back("features." + std::to_string(stage) + "." + std::to_string(b));
  b0.push_back("features.8");
  std::vector<std::string> small, large;
  for (int i = 0; i <= 12; ++i) small.push_back("features." + std::to_string(i));
  for (int i = 0; i <= 16; ++i) large.push_back("features." + std::to_string(i));
  for (const Case& c : {Case{"efficientnet", "b0", b0}, Case{"mobilenet_v3", "small", small},
                        Case{"mobilenet_v3", "large", large}}) {
    CAPTURE(std::string(c.variant));
    ZooModel m(kEfficientNetLibrary, component_id(c.family), default_config(c.family, c.variant));
    REQUIRE((m.t->layer_depths != nullptr));
    const tp_layer_depth_t* entries = nullptr;
    uint32_t count = 0;
    REQUIRE_MESSAGE(m.t->layer_depths(m.self, &entries, &count) == TP_OK, m.error());
    REQUIRE(count == c.prefixes.size());
    for (uint32_t i = 0; i < count; ++i) {
      CHECK(std::string(entries[i].prefix) == c.prefixes[i]);
      // EfficientNet's last conv shares the last block's depth (timm's conv_head, MATCH_PREV_GROUP).
      const bool with_last_block = std::string(c.family) == "efficientnet" && i + 1 == count;
      CHECK(entries[i].depth == (with_last_block ? i - 1 : i));
    }
    // Every parameter but the classifier's is claimed (whole name components), each by one prefix.
    for (const auto& e : m.state()) {
      if (e.is_buffer) continue;
      CAPTURE(e.name);
      int claims = 0;
      for (uint32_t i = 0; i < count; ++i) claims += e.name.rfind(std::string(entries[i].prefix) + ".", 0) == 0 ? 1 : 0;
      CHECK(claims == (e.name.rfind("classifier.", 0) == 0 ? 0 : 1));
    }
  }
}

TEST_CASE("efficientnet: config values are validated") {
  struct Bad {
    const char* id;
    ZooConfig config;
    const char* message;
  };
  const Bad cases[] = {
      {kEfficientNetId, efficientnet_config("b8"), "org.torchhost.efficientnet: variant must be one of b0 .. b7, got \"b8\""},
      {kEfficientNetId, efficientnet_config("b0", 0), "num_classes must be positive, got 0"},
      {kEfficientNetId, efficientnet_config("b0", 10, -1.0, 0.2, 0), "in_channels must be positive, got 0"},
      {kEfficientNetId, efficientnet_config("b0", 10, 1.0), "dropout must be in [0, 1)"},
      {kEfficientNetId, efficientnet_config("b0", 10, -0.5), "dropout must be in [0, 1)"},
      {kEfficientNetId, efficientnet_config("b0", 10, 0.2, 1.0), "stochastic_depth_prob must be in [0, 1)"},
      {kEfficientNetId, efficientnet_config("b0", 10, 0.2, -0.1), "stochastic_depth_prob must be in [0, 1)"},
      {kMobileNetV3Id, mobilenet_v3_config("medium"), "org.torchhost.mobilenet_v3: variant must be \"small\" or \"large\""},
      {kMobileNetV3Id, mobilenet_v3_config("small", -3), "num_classes must be positive, got -3"},
      {kMobileNetV3Id, mobilenet_v3_config("large", 10, 1.5), "dropout must be in [0, 1), got 1.5"},
  };
  for (const Bad& c : cases) {
    CAPTURE(std::string(c.message));
    ZooModel bad(kEfficientNetLibrary, c.id, c.config, 1, /*expect_ok=*/false);
    CHECK(bad.status == TP_ERR_CONFIG);
    CHECK(bad.error().find(c.message) != std::string::npos);
  }
}

TEST_CASE("efficientnet: forward shapes, in_channels, input dtype and a wrong image") {
  for (const char* id : {kEfficientNetId, kMobileNetV3Id}) {
    CAPTURE(std::string(id));
    const ZooConfig config = std::string(id) == kEfficientNetId ? efficientnet_config("b0", 5, -1.0, 0.2, 1)
                                                                 : mobilenet_v3_config("small", 5, 0.2, 1);
    ZooModel m(kEfficientNetLibrary, id, config);
    m.train(false);
    Fields in = {{"image", at::randn({2, 1, 40, 32})}};
    CHECK(m.forward(in).at("logits").sizes() == at::IntArrayRef({2, 5}));
    REQUIRE(m.t->to_device(m.self, TP_DEVICE_CPU, 0, TP_DTYPE_FLOAT64) == TP_OK);
    CHECK((m.forward(in).at("logits").scalar_type() == at::kDouble));  // float32 batch cast to the model
    CHECK((m.named("features.0.1.num_batches_tracked").scalar_type() == at::kLong));

    std::map<std::string, at::Tensor> out;
    Fields rgb = {{"image", at::randn({2, 3, 32, 32})}};
    CHECK(m.try_forward(rgb, out) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.error().find("in_channels = 1") != std::string::npos);
    CHECK(m.error().find("[2, 3, 32, 32]") != std::string::npos);
    Fields other = {{"pixels", at::randn({2, 1, 32, 32})}};
    CHECK(m.try_forward(other, out) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.error().find("'image'") != std::string::npos);
  }
}

TEST_CASE("efficientnet: torchvision's initialisation") {
  // kaiming_normal_(mode="fan_out"): std = sqrt(2 / (out_channels * k * k)), depthwise included.
  ZooModel e(kEfficientNetLibrary, kEfficientNetId, efficientnet_config("b0", 100));
  const std::pair<const char*, double> convs[] = {
      {"features.8.0.weight", std::sqrt(2.0 / 1280)},               // [1280, 320, 1, 1]: 409,600 draws
      {"features.6.1.block.1.0.weight", std::sqrt(2.0 / (1152 * 25))},  // depthwise [1152, 1, 5, 5]
      {"features.6.1.block.2.fc1.weight", std::sqrt(2.0 / 48)},     // [48, 1152, 1, 1]
  };
  for (const auto& [name, std] : convs) {
    CAPTURE(std::string(name));
    CHECK(e.named(name).std().item<double>() == doctest::Approx(std).epsilon(0.02));
  }
  // The classifier: U(-1/sqrt(num_classes), 1/sqrt(num_classes)), bias 0.
  const at::Tensor w = e.named("classifier.1.weight");
  CHECK(w.abs().max().item<double>() <= 0.1);
  CHECK(w.abs().max().item<double>() > 0.099);
  CHECK(at::equal(e.named("classifier.1.bias"), at::zeros({100})));

  ZooModel m(kEfficientNetLibrary, kMobileNetV3Id, mobilenet_v3_config("large"));
  CHECK(m.named("classifier.0.weight").std().item<double>() == doctest::Approx(0.01).epsilon(0.01));
  CHECK(m.named("classifier.3.weight").std().item<double>() == doctest::Approx(0.01).epsilon(0.01));
  CHECK(at::equal(m.named("classifier.3.bias"), at::zeros({1000})));

  // Norms 1 and 0; squeeze-excitation biases 0.
  for (ZooModel* model : {&e, &m}) {
    for (const auto& entry : model->state()) {
      if (entry.is_buffer) continue;
      const at::Tensor& t = tensor_of(entry.handle);
      const bool bias = entry.name.size() > 5 && entry.name.compare(entry.name.size() - 5, 5, ".bias") == 0;
      if (t.dim() == 1 && entry.name.rfind("classifier", 0) != 0) {
        CAPTURE(entry.name);
        CHECK(at::equal(t, at::full_like(t, bias ? 0.0 : 1.0)));
      }
    }
  }
}

}  // namespace
