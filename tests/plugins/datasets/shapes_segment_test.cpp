// shapes.so with task = "segment", through the C ABI: fields and dtypes, class masks that agree
// with the image (shapes brighter than the background), several shapes per image, determinism
// (PLG-8), the joint flip, and the task key's refusal of unknown values.
#include <algorithm>
#include <array>
#include <set>
#include <vector>

#include <doctest/doctest.h>

#include "support/tier_s_harness.h"

namespace {

using tp::test::Dataset;
using tp::test::FakeConfig;
using tp::test::PluginLibrary;
using tp::test::Sample;

constexpr const char* kShapesSegmentId = "org.torchhost.shapes";
constexpr int64_t kShapesSegmentSide = 32;
constexpr size_t kShapesSegmentPlane = kShapesSegmentSide * kShapesSegmentSide;

void configure_segment(const PluginLibrary& lib, FakeConfig& cfg) {
  tp::test::apply_schema_defaults(*lib.entry().descriptor_at(0), cfg);
  cfg.values["task"] = std::string("segment");
}

/// Mean normalised luma (0.299 R + 0.587 G + 0.114 B) of the pixels whose mask is or is not 0.
double mean_luma(const Sample& s, bool background) {
  const auto image = s.values<float>("image");
  const auto mask = s.values<int64_t>("mask");
  double sum = 0, n = 0;
  for (size_t i = 0; i < kShapesSegmentPlane; ++i) {
    if ((mask[i] == 0) != background) continue;
    sum += 0.299 * image[i] + 0.587 * image[kShapesSegmentPlane + i] + 0.114 * image[2 * kShapesSegmentPlane + i];
    n += 1;
  }
  return sum / n;
}

}  // namespace

TEST_CASE("shapes segment: image float32 [3, S, S] and mask int64 [S, S] with classes 0..3, several shapes") {
  PluginLibrary lib("shapes");
  FakeConfig cfg;
  configure_segment(lib, cfg);
  Dataset val(lib, kShapesSegmentId, cfg, "val");
  std::array<int, 4> images_with{};  // per class value: images holding it
  std::array<int, 4> shape_count{};  // images with 1, 2, 3 classes present (a lower bound on shapes)
  for (uint64_t i = 0; i < 200; ++i) {
    CAPTURE(i);
    const Sample s = val.get(i);
    REQUIRE(s.fields().size() == 2);
    const DLTensor& image = s.tensor("image");
    const DLTensor& mask = s.tensor("mask");
    REQUIRE((image.dtype.code == kDLFloat && image.dtype.bits == 32));
    REQUIRE((mask.dtype.code == kDLInt && mask.dtype.bits == 64));
    CHECK(s.shape("image") == std::vector<int64_t>{3, kShapesSegmentSide, kShapesSegmentSide});
    CHECK(s.shape("mask") == std::vector<int64_t>{kShapesSegmentSide, kShapesSegmentSide});
    std::set<int64_t> present;
    for (int64_t m : s.values<int64_t>("mask")) {
      REQUIRE((m >= 0 && m <= 3));
      present.insert(m);
    }
    REQUIRE(present.count(0) == 1);  // shapes never cover the whole image
    REQUIRE(present.size() >= 2);    // at least one shape is visible
    for (int64_t m : present) ++images_with[static_cast<size_t>(m)];
    ++shape_count[present.size() - 1];
    // Shapes are brighter than the background by >= 0.35 luma (0.35 / 0.3 normalised); anti-
    // aliased edges and noise take some of it.
    CHECK(mean_luma(s, false) - mean_luma(s, true) > 0.2 / 0.3);
  }
  for (size_t c = 1; c < 4; ++c) CHECK(images_with[c] > 60);  // each class in about half the images
  CHECK(shape_count[2] + shape_count[3] > 40);                // images with 2 or 3 distinct classes
}

TEST_CASE("shapes segment: a pure function of (seed, split, index); the train flip mirrors image and mask") {
  PluginLibrary lib("shapes");
  FakeConfig cfg;
  configure_segment(lib, cfg);
  cfg.values["augment"] = false;
  Dataset plain(lib, kShapesSegmentId, cfg, "train");
  cfg.values["augment"] = true;
  Dataset train(lib, kShapesSegmentId, cfg, "train");
  Dataset val(lib, kShapesSegmentId, cfg, "val");
  CHECK(val.get(5, 1).bytes() == val.get(5, 2, /*worker=*/3).bytes());
  CHECK(val.get(5).bytes() != val.get(6).bytes());
  CHECK(plain.get(5, 1).bytes() != val.get(5).bytes());  // splits hold other images
  int flipped = 0;
  for (uint64_t seed = 0; seed < 32; ++seed) {
    const Sample base = plain.get(9, seed);
    const Sample s = train.get(9, seed);
    CHECK(train.get(9, seed).bytes() == s.bytes());
    if (s.bytes() == base.bytes()) continue;
    ++flipped;
    const auto m = s.values<int64_t>("mask"), bm = base.values<int64_t>("mask");
    const auto im = s.values<float>("image"), bim = base.values<float>("image");
    bool mirrored = true;
    for (size_t row = 0; row < kShapesSegmentSide; ++row)
      for (size_t x = 0; x < kShapesSegmentSide; ++x) {
        mirrored &= m[row * kShapesSegmentSide + x] == bm[row * kShapesSegmentSide + (kShapesSegmentSide - 1 - x)];
        for (size_t c = 0; c < 3; ++c) mirrored &= im[(c * kShapesSegmentSide + row) * kShapesSegmentSide + x] == bim[(c * kShapesSegmentSide + row) * kShapesSegmentSide + (kShapesSegmentSide - 1 - x)];
      }
    CHECK(mirrored);
  }
  CHECK(flipped > 8);  // about half of 32 seeds
  CHECK(flipped < 24);
}

TEST_CASE("shapes segment: max_shapes = 1 gives one class per image; an unknown task is refused") {
  PluginLibrary lib("shapes");
  FakeConfig cfg;
  configure_segment(lib, cfg);
  cfg.values["max_shapes"] = int64_t{1};
  Dataset val(lib, kShapesSegmentId, cfg, "val");
  for (uint64_t i = 0; i < 50; ++i) {
    const Sample s = val.get(i);
    std::set<int64_t> present(s.values<int64_t>("mask").begin(), s.values<int64_t>("mask").end());
    CHECK(present.size() == 2);
  }
  cfg.values["task"] = std::string("panoptic");
  void* self = nullptr;
  CHECK(lib.dataset_table(kShapesSegmentId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
  CHECK(lib.host.last_error.find("task must be \"classify\", \"segment\" or \"detect\"") != std::string::npos);
}
