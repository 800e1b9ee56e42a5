// detection.so through its C ABI, without Python: every config's state names, shapes, kinds and
// order against torchvision_table.txt (detection_oracle.py wrote it from torchvision 0.29.1;
// zoo_detection_oracle checks it is still current), config validation, input errors, the outputs
// in training and eval mode (ragged detections), the loss's fields, counts and terms (images
// without boxes included), layer depths and freeze_bn_stats.
#include "zoo_detection/detection_support.h"

#include <ATen/ops/isfinite.h>

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

/// A batch of two images padded to 70 x 100 (the second 50 x 64), with their true sizes.
Fields padded_batch(int64_t channels = 3) {
  return {{"image", at::randn({2, channels, 70, 100})},
          {"image_lengths", longs({3, 70, 100, 3, 50, 64}).view({2, 3})}};
}

/// Boxes for padded_batch: three in image 0, none in image 1.
Fields batch_targets() {
  const at::Tensor boxes = at::tensor(std::vector<float>{10, 12, 60, 50, 40, 5, 95, 68, 2, 30, 20, 44}).view({3, 4});
  return ragged_targets(boxes, longs({1, 4, 0}), longs({0, 3, 3}));
}

TEST_CASE("fcos: every config's state equals torchvision's, name by name and in order") {
  REQUIRE(detection_table().entries.size() == fcos_shapes().size());
  for (const auto& [name, shape] : fcos_shapes()) {
    CAPTURE(name);
    ZooModel m(kDetectionLibrary, kFcosId, fcos_config(shape));
    CHECK(mismatches(state_lines(m), detection_table().entries.at(name)) == 0);
    const int64_t count = m.parameter_count();
    CHECK(count == detection_table().counts.at(name));
    if (name != "resnet50") continue;
    // torchvision's meta["num_params"] of its COCO weights, 32,269,600, counts the backbone's
    // norms as FrozenBatchNorm2d buffers: ours less the BatchNorm weights and biases.
    int64_t norms = 0;
    for (const auto& e : m.state())
      if (e.name.rfind("backbone.body.", 0) == 0 && tensor_of(e.handle).dim() == 1 && !e.is_buffer) norms += tensor_of(e.handle).numel();
    CHECK(count - norms == 32'269'600);
  }
}

TEST_CASE("fcos: config values are validated") {
  struct Bad {
    ZooConfig config;
    const char* message;
  };
  std::vector<Bad> cases;
  ZooConfig c = small_config();
  c["backbone"] = std::string("resnet101");
  cases.push_back({c, "org.torchhost.fcos: backbone must be resnet50, resnet34 or resnet18, got \"resnet101\""});
  c = small_config();
  c["fpn_channels"] = int64_t{48};
  cases.push_back({c, "fpn_channels must be a positive multiple of 32 (the head's GroupNorm has 32 groups), got 48"});
  cases.push_back({small_config(0), "num_classes must be positive, got 0"});
  c = small_config();
  c["head_convs"] = int64_t{17};
  cases.push_back({c, "head_convs"});
  c = small_config();
  c["score_thresh"] = 1.5;
  cases.push_back({c, "score_thresh"});
  c = small_config();
  c["detections_per_img"] = int64_t{0};
  cases.push_back({c, "detections_per_img"});
  for (const Bad& bad : cases) {
    CAPTURE(std::string(bad.message));
    ZooModel m(kDetectionLibrary, kFcosId, bad.config, 1, /*expect_ok=*/false);
    CHECK(m.status == TP_ERR_CONFIG);
    CHECK(m.error().find(bad.message) != std::string::npos);
  }
  FcosLossInstance loss({{"center_sampling_radius", 0.0}}, /*expect_ok=*/false);
  CHECK(loss.status == TP_ERR_CONFIG);
  CHECK(loss.error().find("center_sampling_radius must be positive") != std::string::npos);
}

TEST_CASE("fcos: outputs in training and eval mode, ragged detections, orig_size") {
  ZooModel m(kDetectionLibrary, kFcosId, small_config());
  // 70 x 100 pads to 96 x 128: P3 12 x 16, P4 6 x 8, P5 3 x 4, P6 2 x 2, P7 1 x 1.
  const int64_t anchors = 192 + 48 + 12 + 4 + 1;
  Fields in = padded_batch();
  m.train(true);
  const auto train = m.forward(in);
  CHECK(train.size() == 5u);
  CHECK(train.at("cls_logits").sizes() == at::IntArrayRef({2, anchors, 5}));
  CHECK(train.at("bbox_regression").sizes() == at::IntArrayRef({2, anchors, 4}));
  CHECK(train.at("bbox_ctrness").sizes() == at::IntArrayRef({2, anchors, 1}));
  CHECK(train.at("anchors").sizes() == at::IntArrayRef({2, anchors, 4}));
  CHECK(at::equal(train.at("num_anchors_per_level")[1], longs({192, 48, 12, 4, 1})));
  // The first P3 anchor is centred on (0, 0) with side 8. P6 (2 x 2, side 64) has torchvision's
  // strides 128 // 2 = 64 across and 96 // 2 = 48 down, not 64 and 64.
  const int64_t p6 = 192 + 48 + 12;
  CHECK(at::equal(train.at("anchors")[0][0], at::tensor(std::vector<float>{-4, -4, 4, 4})));
  CHECK(at::equal(train.at("anchors")[1][p6 + 1], at::tensor(std::vector<float>{32, -32, 96, 32})));
  CHECK(at::equal(train.at("anchors")[1][p6 + 2], at::tensor(std::vector<float>{-32, 16, 32, 80})));

  m.train(false);
  at::NoGradGuard no_grad;
  const auto eval = m.forward(in);
  CHECK(eval.size() == 11u);
  const at::Tensor offsets = eval.at("detection_boxes_offsets");
  REQUIRE(offsets.sizes() == at::IntArrayRef({3}));
  CHECK((offsets.scalar_type() == at::kLong));
  CHECK(at::equal(eval.at("detection_scores_offsets"), offsets));
  CHECK(at::equal(eval.at("detection_labels_offsets"), offsets));
  const int64_t d = offsets[2].item<int64_t>();
  CHECK(eval.at("detection_boxes").sizes() == at::IntArrayRef({d, 4}));
  CHECK(eval.at("detection_scores").sizes() == at::IntArrayRef({d}));
  CHECK((eval.at("detection_labels").scalar_type() == at::kLong));
  // torchvision's initialisation scores sqrt(0.01 * 0.5) ~ 0.07 everywhere: no detection above 0.2.
  CHECK(d == 0);

  // A config that keeps detections: each image's boxes inside its own size, best first, at most
  // detections_per_img; with orig_size the boxes scale to it.
  ZooConfig low = small_config();
  low["score_thresh"] = 0.0;
  low["detections_per_img"] = int64_t{7};
  ZooModel keep(kDetectionLibrary, kFcosId, low);
  keep.train(false);
  const auto all = keep.forward(in);
  CHECK(at::equal(all.at("detection_scores_offsets"), longs({0, 7, 14})));
  const at::Tensor boxes = all.at("detection_boxes"), scores = all.at("detection_scores");
  CHECK(boxes.narrow(0, 7, 7).select(1, 2).max().item<float>() <= 64.f);
  CHECK(boxes.narrow(0, 7, 7).select(1, 3).max().item<float>() <= 50.f);
  for (int64_t i : {0, 7}) CHECK(at::equal(scores.narrow(0, i, 7), std::get<0>(scores.narrow(0, i, 7).sort(0, true))));
  CHECK(all.at("detection_labels").max().item<int64_t>() < 5);
  Fields resized = padded_batch();
  resized.items[0].second = in.items[0].second;
  resized.items.push_back({"orig_size", longs({140, 200, 50, 64}).view({2, 2})});
  const at::Tensor scaled = keep.forward(resized).at("detection_boxes");
  CHECK(at::allclose(scaled.narrow(0, 0, 7), boxes.narrow(0, 0, 7) * 2));
  CHECK(at::equal(scaled.narrow(0, 7, 7), boxes.narrow(0, 7, 7)));
}

TEST_CASE("fcos: input errors name the field, the expected and the actual dtype and shape") {
  ZooModel m(kDetectionLibrary, kFcosId, small_config());
  std::map<std::string, at::Tensor> out;
  Fields gray = {{"image", at::randn({2, 1, 32, 32})}};
  CHECK(m.try_forward(gray, out) == TP_ERR_INVALID_ARGUMENT);
  CHECK(m.error() ==
        "org.torchhost.fcos: input 'image': expected a floating [B, 3, H, W] image (in_channels = 3), got Float "
        "[2, 1, 32, 32]");
  Fields ints = {{"image", at::zeros({2, 3, 32, 32}, at::kLong)}};
  CHECK(m.try_forward(ints, out) == TP_ERR_INVALID_ARGUMENT);
  Fields lengths = {{"image", at::randn({2, 3, 32, 32})}, {"image_lengths", at::ones({2, 2}, at::kLong)}};
  CHECK(m.try_forward(lengths, out) == TP_ERR_INVALID_ARGUMENT);
  CHECK(m.error() ==
        "org.torchhost.fcos: input 'image_lengths': expected an integer [2, 3] tensor of each image's (C, H, W) (the "
        "loader's padding sizes of 'image'), got Long [2, 2]");
  Fields orig = {{"image", at::randn({2, 3, 32, 32})}, {"orig_size", at::ones({2})}};
  CHECK(m.try_forward(orig, out) == TP_ERR_INVALID_ARGUMENT);
  CHECK(m.error().find("input 'orig_size': expected a [2, 2] tensor") != std::string::npos);
  // A true size larger than the batch, read in eval mode.
  m.train(false);
  Fields outside = {{"image", at::randn({1, 3, 32, 32})}, {"image_lengths", longs({3, 40, 32}).view({1, 3})}};
  CHECK(m.try_forward(outside, out) == TP_ERR_INVALID_ARGUMENT);
  CHECK(m.error() == "org.torchhost.fcos: input 'image_lengths': image 0 is 40 x 32, outside the batch's 32 x 32");
}

TEST_CASE("fcos_loss: sum, count on the device, terms, images without boxes, field, label and box errors") {
  ZooModel m(kDetectionLibrary, kFcosId, small_config());
  m.train(true);
  Fields in = padded_batch();
  const auto out = m.forward(in);
  FcosLossInstance loss;
  Fields outputs = loss_outputs(out);
  Fields targets = batch_targets();
  const auto [sum, count] = loss.forward(outputs, targets);
  CHECK(sum.dim() == 0);
  CHECK(count.dim() == 0);
  CHECK((count.scalar_type() == at::kLong));
  CHECK(count.item<int64_t>() > 0);
  const auto terms = loss.terms();
  REQUIRE(terms.size() == 3u);
  CHECK(at::allclose(terms.at("classification") + terms.at("bbox_regression") + terms.at("bbox_ctrness"), sum));
  CHECK(!terms.at("classification").requires_grad());
  CHECK(terms.at("bbox_regression").item<double>() > 0.0);
  (sum / count).backward();
  for (const auto& e : m.state())
    if (!e.is_buffer) {
      CAPTURE(e.name);
      REQUIRE(tensor_of(e.handle).grad().defined());
      CHECK(at::isfinite(tensor_of(e.handle).grad()).all().item<bool>());
    }

  // No box in the batch: torchvision's empty branch, every location background.
  Fields none = ragged_targets(at::zeros({0, 4}), at::zeros({0}, at::kLong), at::zeros({3}, at::kLong));
  Fields detached = loss_outputs(m.forward(in));
  const auto [empty_sum, empty_count] = loss.forward(detached, none);
  CHECK(empty_count.item<int64_t>() == 1);
  CHECK(loss.terms().at("bbox_regression").item<double>() == 0.0);
  CHECK(loss.terms().at("bbox_ctrness").item<double>() == 0.0);
  CHECK(empty_sum.item<double>() > 0.0);

  std::pair<at::Tensor, at::Tensor> result;
  Fields float_labels = ragged_targets(targets.items[0].second, at::zeros({3}), targets.items[1].second);
  CHECK(loss.try_forward(outputs, float_labels, result) == TP_ERR_INVALID_ARGUMENT);
  CHECK(loss.error() ==
        "org.torchhost.fcos_loss: target 'labels': expected integer [3] labels, one per box, got Float [3]");
  Fields short_offsets = ragged_targets(targets.items[0].second, targets.items[2].second, longs({0, 3}));
  CHECK(loss.try_forward(outputs, short_offsets, result) == TP_ERR_INVALID_ARGUMENT);
  CHECK(loss.error().find("target 'boxes_offsets': expected int64 [3] offsets") != std::string::npos);
  Fields missing = {{"boxes", targets.items[0].second}};
  CHECK(loss.try_forward(outputs, missing, result) == TP_ERR_INVALID_ARGUMENT);
  CHECK(loss.error().find("'labels'") != std::string::npos);

  // A label the model has no class for trained as background, silently (issue 41, item 10).
  Fields beyond = ragged_targets(targets.items[0].second, longs({1, 5, 0}), targets.items[1].second);
  CHECK(loss.try_forward(outputs, beyond, result) == TP_ERR_INVALID_ARGUMENT);
  CHECK(loss.error().find("target 'labels' holds the label 5, outside [0, 5) of the model's 5 classes") !=
        std::string::npos);
  Fields negative = ragged_targets(targets.items[0].second, longs({1, -1, 0}), targets.items[1].second);
  CHECK(loss.try_forward(outputs, negative, result) == TP_ERR_INVALID_ARGUMENT);
  CHECK(loss.error().find("holds the label -1") != std::string::npos);

  // Boxes given as x, y, w, h trained silently to a val/map near 0 (issue 43): the last one here
  // (sample 1's second) reads as y2 < y1.
  const at::Tensor xywh = at::tensor(std::vector<float>{10, 12, 50, 38, 40, 5, 55, 63, 2, 30, 18, 14}).view({3, 4});
  Fields wrong_convention = ragged_targets(xywh, longs({1, 4, 0}), longs({0, 1, 3}));
  CHECK(loss.try_forward(outputs, wrong_convention, result) == TP_ERR_INVALID_ARGUMENT);
  CHECK(loss.error().find("target 'boxes' holds 1 of 3 boxes in this batch with x2 <= x1, y2 <= y1 or a non-finite "
                          "corner (the first: sample 1 of the batch, box [2, 30, 18, 14])") != std::string::npos);
  CHECK(loss.error().find("did you give x, y, w, h") != std::string::npos);
  const at::Tensor not_finite =
      at::tensor(std::vector<float>{10, 12, 60, 50, 40, 5, NAN, 68, 2, 30, 20, 44}).view({3, 4});
  Fields non_finite_boxes = ragged_targets(not_finite, longs({1, 4, 0}), longs({0, 3, 3}));
  CHECK(loss.try_forward(outputs, non_finite_boxes, result) == TP_ERR_INVALID_ARGUMENT);
  CHECK(loss.error().find("holds 1 of 3 boxes") != std::string::npos);
  CHECK(loss.try_forward(outputs, targets, result) == TP_OK);  // the x1, y1, x2, y2 boxes still train
}

TEST_CASE("fcos: layer depths, freeze_bn_stats and activation checkpointing") {
  ZooModel m(kDetectionLibrary, kFcosId, small_config());
  const tp_layer_depth_t* entries = nullptr;
  uint32_t count = 0;
  REQUIRE((m.t->layer_depths != nullptr));
  REQUIRE_MESSAGE(m.t->layer_depths(m.self, &entries, &count) == TP_OK, m.error());
  REQUIRE(count == 2u + 8u);  // conv1, bn1, then ResNet-18's 8 blocks
  CHECK(std::string(entries[0].prefix) == "backbone.body.conv1");
  CHECK(std::string(entries[9].prefix) == "backbone.body.layer4.1");
  CHECK(entries[9].depth == 8u);
  for (bool frozen : {true, false}) {
    CAPTURE(frozen);
    ZooModel f(kDetectionLibrary, kFcosId, small_config());
    REQUIRE_MESSAGE(f.t->set_batchnorm_frozen(f.self, frozen) == TP_OK, f.error());
    const auto [moved, total] = buffers_moved_by_forward(f);
    CHECK(moved == (frozen ? 0 : total));
  }
  // Checkpointing the ResNet's blocks changes no output. The FPN taps three stages, so a tapped
  // map's gradient sums the next block's branches and the FPN's; checkpointing adds the block's
  // first, inside its recompute, so backbone gradients may differ by float32 rounding (as
  // segmentation's aux head; measured below).
  std::vector<at::Tensor> runs[2];
  for (bool on : {false, true}) {
    ZooModel c(kDetectionLibrary, kFcosId, small_config());
    if (on) REQUIRE_MESSAGE(c.t->set_activation_checkpointing(c.self, true) == TP_OK, c.error());
    c.train(true);
    at::manual_seed(3);
    Fields in = padded_batch();
    const auto out = c.forward(in);
    FcosLossInstance loss;
    Fields outputs = loss_outputs(out);
    Fields targets = batch_targets();
    const auto [sum, count] = loss.forward(outputs, targets);
    (sum / count).backward();
    runs[on].push_back(sum.detach());
    for (const auto& e : c.state())
      if (!e.is_buffer) runs[on].push_back(tensor_of(e.handle).grad().clone());
  }
  CHECK(at::equal(runs[0][0], runs[1][0]));
  double worst = 0.0;
  for (size_t i = 1; i < runs[0].size(); ++i) worst = std::max(worst, relative_difference(runs[1][i], runs[0][i]));
  MESSAGE("gradients with checkpointing vs without, max relative difference " << worst);
  CHECK(worst <= 1e-5);
}

}  // namespace
