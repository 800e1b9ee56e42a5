// segmentation.so through its C ABI, without Python: every architecture's state names, shapes,
// kinds and order against torchvision_table.txt (segmentation_oracle.py wrote it from torchvision
// 0.29.1; zoo_segmentation_oracle checks it is still current), parameter counts (and torchvision's
// published ones), config validation, output shapes, input errors, layer depths, initialisation,
// activation checkpointing and freeze_bn_stats.
#include "zoo_segmentation/segmentation_support.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace {

using namespace tp::test;

/// Our state as the table writes it.
std::vector<std::string> state_lines(ZooModel& m) {
  std::vector<std::string> out;
  for (const auto& e : m.state()) out.push_back(e.name + " " + shape_key(tensor_of(e.handle).sizes()) + (e.is_buffer ? " b" : " p"));
  return out;
}

/// How many of `ours` differ from `expected` position by position (the first few are reported).
size_t mismatches(const std::vector<std::string>& ours, const std::vector<std::string>& expected) {
  size_t n = ours.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < std::min(ours.size(), expected.size()); ++i) {
    if (ours[i] == expected[i]) continue;
    if (++n <= 5) MESSAGE("entry " << i << ": ours '" << ours[i] << "', torchvision '" << expected[i] << "'");
  }
  return n;
}

TEST_CASE("segmentation: every architecture's state equals torchvision's, name by name and in order") {
  // torchvision's meta["num_params"] of its COCO weights (aux heads included where they exist).
  const std::map<std::string, int64_t> published = {{"fcn_resnet50", 35'322'218},
                                                    {"deeplabv3_resnet50", 42'004'074},
                                                    {"deeplabv3_mobilenet_v3_large", 11'029'328},
                                                    {"lraspp_mobilenet_v3_large", 3'221'538}};
  REQUIRE(segmentation_table().entries.size() == kArchs.size());
  for (const std::string& arch : kArchs) {
    CAPTURE(arch);
    const std::vector<std::string>& expected = segmentation_table().entries.at(arch);
    ZooModel m(kSegmentationLibrary, kSegmentationId, segmentation_config(arch, has_aux(arch)));
    CHECK(mismatches(state_lines(m), expected) == 0);
    const int64_t count = m.parameter_count();
    CHECK(count == segmentation_table().counts.at(arch + (has_aux(arch) ? " 1" : " 0")));
    CHECK(count == published.at(arch));
    if (!has_aux(arch)) continue;
    // Without aux_loss: the same minus aux_classifier.
    ZooModel plain(kSegmentationLibrary, kSegmentationId, segmentation_config(arch, false));
    std::vector<std::string> without_aux;
    for (const auto& line : expected)
      if (line.rfind("aux_classifier.", 0) != 0) without_aux.push_back(line);
    CHECK(mismatches(state_lines(plain), without_aux) == 0);
    CHECK(plain.parameter_count() == segmentation_table().counts.at(arch + " 0"));
  }
}

TEST_CASE("segmentation: config values are validated") {
  struct Bad {
    ZooConfig config;
    const char* message;
  };
  const Bad cases[] = {
      {segmentation_config("unet", false),
       "org.torchhost.segmentation: arch must be fcn_resnet50, deeplabv3_resnet50, deeplabv3_mobilenet_v3_large or "
       "lraspp_mobilenet_v3_large, got \"unet\""},
      {segmentation_config("lraspp_mobilenet_v3_large", true),
       "aux_loss must be false for lraspp_mobilenet_v3_large (LRASPP has no auxiliary head)"},
      {segmentation_config("fcn_resnet50", false, 0), "num_classes must be positive, got 0"},
      {segmentation_config("lraspp_mobilenet_v3_large", false, 21, 0), "in_channels must be positive, got 0"},
  };
  for (const Bad& c : cases) {
    CAPTURE(std::string(c.message));
    ZooModel bad(kSegmentationLibrary, kSegmentationId, c.config, 1, /*expect_ok=*/false);
    CHECK(bad.status == TP_ERR_CONFIG);
    CHECK(bad.error().find(c.message) != std::string::npos);
  }
}

TEST_CASE("segmentation: out and aux at the input's size, in_channels, input dtype and a wrong image") {
  // 33 x 47: odd and non-square, so the backbones' rounding and the upsampling to the input's size show.
  for (const std::string& arch : kArchs) {
    CAPTURE(arch);
    ZooModel m(kSegmentationLibrary, kSegmentationId, segmentation_config(arch, has_aux(arch), 4, 1));
    m.train(false);
    Fields in = {{"image", at::randn({2, 1, 33, 47})}};
    const auto out = m.forward(in);
    CHECK(out.size() == (has_aux(arch) ? 2u : 1u));
    CHECK(out.at("out").sizes() == at::IntArrayRef({2, 4, 33, 47}));
    if (has_aux(arch)) CHECK(out.at("aux").sizes() == at::IntArrayRef({2, 4, 33, 47}));

    std::map<std::string, at::Tensor> bad;
    Fields rgb = {{"image", at::randn({2, 3, 32, 32})}};
    CHECK(m.try_forward(rgb, bad) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.error() ==
          "org.torchhost.segmentation: input 'image': expected a floating [B, 1, H, W] image (in_channels = 1), got "
          "Float [2, 3, 32, 32]");
    Fields labels = {{"image", at::zeros({2, 1, 32, 32}, at::kLong)}};
    CHECK(m.try_forward(labels, bad) == TP_ERR_INVALID_ARGUMENT);
    Fields other = {{"pixels", at::randn({2, 1, 32, 32})}};
    CHECK(m.try_forward(other, bad) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.error().find("'image'") != std::string::npos);
  }
  // A float32 batch drives a float64 model; num_batches_tracked stays int64.
  ZooModel m(kSegmentationLibrary, kSegmentationId, segmentation_config("lraspp_mobilenet_v3_large", false, 3));
  REQUIRE(m.t->to_device(m.self, TP_DEVICE_CPU, 0, TP_DTYPE_FLOAT64) == TP_OK);
  m.train(false);
  Fields in = {{"image", at::randn({1, 3, 40, 24})}};
  CHECK((m.forward(in).at("out").scalar_type() == at::kDouble));
  CHECK((m.named("classifier.cbr.1.num_batches_tracked").scalar_type() == at::kLong));
}

TEST_CASE("segmentation: layer depths through the C table") {
  std::vector<std::string> resnet = {"backbone.conv1", "backbone.bn1"};
  const int blocks[] = {3, 4, 6, 3};
  for (int layer = 0; layer < 4; ++layer)
    for (int b = 0; b < blocks[layer]; ++b)
      resnet.push_back("backbone.layer" + std::to_string(layer + 1) + "." + std::to_string(b));
  std::vector<std::string> mobilenet;
  for (int i = 0; i <= 16; ++i) mobilenet.push_back("backbone." + std::to_string(i));
  for (const std::string arch : {"fcn_resnet50", "deeplabv3_mobilenet_v3_large"}) {
    CAPTURE(arch);
    const bool is_resnet = arch == "fcn_resnet50";
    ZooModel m(kSegmentationLibrary, kSegmentationId, segmentation_config(arch, true));
    REQUIRE((m.t->layer_depths != nullptr));
    const tp_layer_depth_t* entries = nullptr;
    uint32_t count = 0;
    REQUIRE_MESSAGE(m.t->layer_depths(m.self, &entries, &count) == TP_OK, m.error());
    const std::vector<std::string>& prefixes = is_resnet ? resnet : mobilenet;
    REQUIRE(count == prefixes.size());
    for (uint32_t i = 0; i < count; ++i) {
      CHECK(std::string(entries[i].prefix) == prefixes[i]);
      // ResNet: conv1 and bn1 share depth 0, then each block one deeper.
      CHECK(entries[i].depth == (is_resnet ? (i < 2 ? 0u : i - 1) : i));
    }
    // Every backbone parameter is claimed once; the heads are the head.
    for (const auto& e : m.state()) {
      if (e.is_buffer) continue;
      CAPTURE(e.name);
      int claims = 0;
      for (uint32_t i = 0; i < count; ++i) claims += e.name.rfind(std::string(entries[i].prefix) + ".", 0) == 0 ? 1 : 0;
      CHECK(claims == (e.name.rfind("backbone.", 0) == 0 ? 1 : 0));
    }
  }
}

TEST_CASE("segmentation: torchvision's initialisation") {
  ZooModel m(kSegmentationLibrary, kSegmentationId, segmentation_config("deeplabv3_mobilenet_v3_large", true));
  // The backbone as MobileNetV3: kaiming_normal_(mode="fan_out"), std sqrt(2 / (out * k * k)).
  CHECK(m.named("backbone.16.0.weight").std().item<double>() == doctest::Approx(std::sqrt(2.0 / 960)).epsilon(0.02));
  CHECK(m.named("backbone.13.block.1.0.weight").std().item<double>() ==
        doctest::Approx(std::sqrt(2.0 / (672 * 25))).epsilon(0.05));
  CHECK(at::equal(m.named("backbone.13.block.2.fc1.bias"), at::zeros({168})));
  // The heads keep PyTorch's Conv2d default: U(-b, b) with b = 1 / sqrt(fan_in), bias too.
  const std::pair<const char*, int64_t> head_convs[] = {{"classifier.0.convs.1.0.weight", 960 * 9},
                                                        {"classifier.1.weight", 256 * 9},
                                                        {"aux_classifier.4.weight", 10}};
  for (const auto& [name, fan_in] : head_convs) {
    CAPTURE(std::string(name));
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    const double largest = m.named(name).abs().max().item<double>();
    CHECK(largest <= bound);
    CHECK(largest > 0.9 * bound);
  }
  // Every BatchNorm starts at weight 1 and bias 0.
  for (const auto& e : m.state()) {
    const bool norm = e.name.find(".running_mean") != std::string::npos;
    if (!norm) continue;
    const std::string base = e.name.substr(0, e.name.size() - std::string(".running_mean").size());
    CAPTURE(base);
    const at::Tensor w = m.named(base + ".weight"), b = m.named(base + ".bias");
    CHECK(at::equal(w, at::ones_like(w)));
    CHECK(at::equal(b, at::zeros_like(b)));
  }
}

/// What one training step leaves: the outputs, every parameter's gradient and every buffer, in
/// state order.
struct Step {
  std::vector<at::Tensor> outputs, gradients, buffers;
};

/// One training step (out + 0.5 aux cross-entropy) of a fresh model with checkpointing on or off.
Step step(const std::string& arch, bool aux, bool checkpointing) {
  ZooModel m(kSegmentationLibrary, kSegmentationId, segmentation_config(arch, aux, 5));
  if (checkpointing) REQUIRE_MESSAGE(m.t->set_activation_checkpointing(m.self, true) == TP_OK, m.error());
  m.train(true);
  at::manual_seed(42);  // the heads' dropout draws, replayed alike with checkpointing on
  Fields in = {{"image", at::randn({2, 3, 32, 40})}};
  const at::Tensor target = at::randint(0, 5, {2, 32, 40}, at::kLong);
  const auto outputs = m.forward(in);
  CHECK(has_checkpoint_node(outputs.at("out")) == checkpointing);
  segmentation_loss(outputs, target).backward();
  Step out;
  for (const auto& [name, t] : outputs) out.outputs.push_back(t.detach());
  for (const auto& e : m.state()) {
    const at::Tensor& t = tensor_of(e.handle);
    REQUIRE_MESSAGE((e.is_buffer || t.grad().defined()), e.name);
    if (e.is_buffer) out.buffers.push_back(t.clone());
    else out.gradients.push_back(t.grad().clone());
  }
  return out;
}

size_t count_different(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += at::equal(a[i], b[i]) ? 0 : 1;
  return n;
}

TEST_CASE("segmentation: activation checkpointing: bit-identical without aux, gradients within rounding with it") {
  for (const std::string arch : {"fcn_resnet50", "deeplabv3_mobilenet_v3_large"}) {
    CAPTURE(arch);
    const Step off = step(arch, false, false), on = step(arch, false, true);
    CHECK(count_different(on.outputs, off.outputs) == 0);
    CHECK(count_different(on.gradients, off.gradients) == 0);
    CHECK(count_different(on.buffers, off.buffers) == 0);
  }
  // With aux, the tapped map's gradient sums three terms (the next block's two branches and the
  // aux head); checkpointing adds the block's two first, inside its recompute, so the backbone's
  // gradients may differ by float32 rounding (measured: at most 3.0e-6 of the tensor's largest).
  const Step off = step("fcn_resnet50", true, false), on = step("fcn_resnet50", true, true);
  CHECK(count_different(on.outputs, off.outputs) == 0);
  CHECK(count_different(on.buffers, off.buffers) == 0);
  double worst = 0.0;
  for (size_t i = 0; i < on.gradients.size(); ++i) worst = std::max(worst, relative_difference(on.gradients[i], off.gradients[i]));
  MESSAGE("fcn_resnet50 with aux: gradients with checkpointing vs without, max relative difference " << worst);
  CHECK(worst <= 1e-5);
}

TEST_CASE("segmentation: freeze_bn_stats keeps every BatchNorm's statistics") {
  for (bool frozen : {true, false}) {
    CAPTURE(frozen);
    ZooModel m(kSegmentationLibrary, kSegmentationId, segmentation_config("deeplabv3_mobilenet_v3_large", true, 5));
    REQUIRE_MESSAGE(m.t->set_batchnorm_frozen(m.self, frozen) == TP_OK, m.error());
    const auto [moved, total] = buffers_moved_by_forward(m);
    // 3 buffers per BatchNorm: all of them move in training, none when frozen.
    CHECK(moved == (frozen ? 0 : total));
  }
}


TEST_CASE("segmentation: training step time, batch 16 at 3x64x64 (benchmark)" * doctest::skip()) {
  // Not a check: `zoo_segmentation_tests --no-skip -tc="*benchmark*"` prints the fp32 CPU time of
  // forward + backward (torchvision's criterion) at LibTorch's default thread count.
  for (const auto& [arch, aux] : std::vector<std::pair<std::string, bool>>{{"lraspp_mobilenet_v3_large", false},
                                                                           {"deeplabv3_mobilenet_v3_large", false},
                                                                           {"deeplabv3_mobilenet_v3_large", true}}) {
    ZooModel m(kSegmentationLibrary, kSegmentationId, segmentation_config(arch, aux));
    m.train(true);
    Fields in = {{"image", at::randn({16, 3, 64, 64})}};
    const at::Tensor target = at::randint(0, 21, {16, 64, 64}, at::kLong);
    std::vector<double> seconds;
    for (int i = 0; i < 13; ++i) {
      const auto start = std::chrono::steady_clock::now();
      segmentation_loss(m.forward(in), target).backward();
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      for (const auto& e : m.state())
        if (!e.is_buffer) tensor_of(e.handle).mutable_grad().reset();  // zero_grad(set_to_none=True)
      if (i >= 3) seconds.push_back(took.count());  // 3 warm-up steps
    }
    std::sort(seconds.begin(), seconds.end());
    MESSAGE(arch << std::string(aux ? " with aux" : "") << ": " << at::get_num_threads() << " threads, step median "
                 << seconds[seconds.size() / 2] << " s, min " << seconds.front() << " s, max " << seconds.back() << " s");
  }
}

}  // namespace
