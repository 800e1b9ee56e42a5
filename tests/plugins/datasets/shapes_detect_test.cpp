// shapes.so with task = "detect", through the C ABI: fields and dtypes (boxes and labels ragged,
// ABI 1.6), boxes that frame bright shapes on a darker background, several boxes per image and
// overlapping ones, the image id, determinism (PLG-8), and the train flip mirroring image and boxes.
#include <algorithm>
#include <array>
#include <span>
#include <vector>

#include <doctest/doctest.h>

#include "support/tier_s_harness.h"

namespace {

using tp::test::Dataset;
using tp::test::FakeConfig;
using tp::test::PluginLibrary;
using tp::test::Sample;

constexpr const char* kShapesDetectId = "org.torchhost.shapes";
constexpr int64_t kShapesDetectSide = 64;
constexpr size_t kShapesDetectPlane = kShapesDetectSide * kShapesDetectSide;

void configure_detect(const PluginLibrary& lib, FakeConfig& cfg) {
  tp::test::apply_schema_defaults(*lib.entry().descriptor_at(0), cfg);
  cfg.values["task"] = std::string("detect");
  cfg.values["image_size"] = kShapesDetectSide;
  cfg.values["max_shapes"] = int64_t{4};
}

double luma(std::span<const float> image, size_t i) {
  return 0.299 * image[i] + 0.587 * image[kShapesDetectPlane + i] + 0.114 * image[2 * kShapesDetectPlane + i];
}

double overlap(const float* a, const float* b) {
  const double w = std::min(a[2], b[2]) - std::max(a[0], b[0]);
  const double h = std::min(a[3], b[3]) - std::max(a[1], b[1]);
  return w > 0 && h > 0 ? w * h : 0.0;
}

}  // namespace

TEST_CASE("shapes detect: image, ragged boxes [N, 4] and labels [N], image_id; boxes frame bright shapes") {
  PluginLibrary lib("shapes");
  FakeConfig cfg;
  configure_detect(lib, cfg);
  Dataset val(lib, kShapesDetectId, cfg, "val");
  std::array<int, 6> images_with_boxes{};  // by number of boxes, 0..5
  int overlapping = 0, classes_seen = 0;
  std::array<bool, 3> seen{};
  for (uint64_t i = 0; i < 200; ++i) {
    CAPTURE(i);
    const Sample s = val.get(i);
    REQUIRE(s.fields().size() == 4);
    CHECK(s.shape("image") == std::vector<int64_t>{3, kShapesDetectSide, kShapesDetectSide});
    const std::vector<int64_t> box_shape = s.shape("boxes");
    REQUIRE(box_shape.size() == 2);
    const int64_t n = box_shape[0];
    CHECK(box_shape[1] == 4);
    CHECK(s.shape("labels") == std::vector<int64_t>{n});
    CHECK(s.shape("image_id").empty());  // a scalar: [B] once batched
    CHECK(s.values<int64_t>("image_id")[0] == static_cast<int64_t>(i));
    REQUIRE(n <= 4);
    ++images_with_boxes[static_cast<size_t>(n)];
    const auto boxes = s.values<float>("boxes");
    const auto labels = s.values<int64_t>("labels");
    const auto image = s.values<float>("image");
    // Mean luma inside the boxes against outside every box: the shapes are the brighter.
    std::vector<bool> inside(kShapesDetectPlane, false);
    for (int64_t b = 0; b < n; ++b) {
      const float* box = boxes.data() + 4 * b;
      CHECK((box[0] >= 0 && box[1] >= 0 && box[2] <= kShapesDetectSide && box[3] <= kShapesDetectSide));
      CHECK(box[2] - box[0] >= 4);  // radius >= 0.1 S: about 6 px at S = 64
      CHECK(box[3] - box[1] >= 4);
      CHECK((labels[static_cast<size_t>(b)] >= 0 && labels[static_cast<size_t>(b)] < 3));
      seen[static_cast<size_t>(labels[static_cast<size_t>(b)])] = true;
      for (int64_t c = b + 1; c < n; ++c) overlapping += overlap(box, boxes.data() + 4 * c) > 0 ? 1 : 0;
      for (int64_t y = static_cast<int64_t>(box[1]); y < static_cast<int64_t>(box[3]); ++y)
        for (int64_t x = static_cast<int64_t>(box[0]); x < static_cast<int64_t>(box[2]); ++x)
          inside[static_cast<size_t>(y * kShapesDetectSide + x)] = true;
    }
    double in = 0, out = 0, n_in = 0, n_out = 0;
    for (size_t p = 0; p < kShapesDetectPlane; ++p) (inside[p] ? in : out) += luma(image, p), (inside[p] ? n_in : n_out) += 1;
    if (n > 0 && n_out > 0) CHECK(in / n_in > out / n_out + 0.3);
  }
  for (const bool c : seen) classes_seen += c ? 1 : 0;
  CHECK(classes_seen == 3);
  CHECK(images_with_boxes[0] < 10);  // a shape is dropped only when mostly hidden
  CHECK(images_with_boxes[2] + images_with_boxes[3] + images_with_boxes[4] > 80);
  CHECK(overlapping > 20);  // boxes overlap sometimes
}

TEST_CASE("shapes detect: a pure function of (seed, split, index); the train flip mirrors image and boxes") {
  PluginLibrary lib("shapes");
  FakeConfig cfg;
  configure_detect(lib, cfg);
  cfg.values["augment"] = false;
  Dataset plain(lib, kShapesDetectId, cfg, "train");
  cfg.values["augment"] = true;
  Dataset train(lib, kShapesDetectId, cfg, "train");
  Dataset val(lib, kShapesDetectId, cfg, "val");
  CHECK(val.get(5, 1).bytes() == val.get(5, 2, /*worker=*/3).bytes());
  CHECK(val.get(5).bytes() != val.get(6).bytes());
  int flipped = 0;
  for (uint64_t seed = 0; seed < 32; ++seed) {
    const Sample base = plain.get(9, seed);
    const Sample s = train.get(9, seed);
    CHECK(train.get(9, seed).bytes() == s.bytes());
    if (s.bytes() == base.bytes()) continue;
    ++flipped;
    const auto b = s.values<float>("boxes"), bb = base.values<float>("boxes");
    REQUIRE(b.size() == bb.size());
    for (size_t k = 0; k + 3 < b.size(); k += 4) {
      CHECK(b[k] == kShapesDetectSide - bb[k + 2]);
      CHECK(b[k + 2] == kShapesDetectSide - bb[k]);
      CHECK(b[k + 1] == bb[k + 1]);
      CHECK(b[k + 3] == bb[k + 3]);
    }
    const auto l = s.values<int64_t>("labels"), bl = base.values<int64_t>("labels");
    CHECK(std::equal(l.begin(), l.end(), bl.begin(), bl.end()));
    const auto im = s.values<float>("image"), bim = base.values<float>("image");
    bool mirrored = true;
    for (size_t row = 0; row < 3 * kShapesDetectSide; ++row)
      for (size_t x = 0; x < kShapesDetectSide; ++x) mirrored &= im[row * kShapesDetectSide + x] == bim[row * kShapesDetectSide + (kShapesDetectSide - 1 - x)];
    CHECK(mirrored);
  }
  CHECK(flipped > 8);
  CHECK(flipped < 24);
}
