// coco_detection.so through its C ABI on a tiny COCO set written at test time (PNG and JPEG images
// of different sizes made with OpenCV; a JSON with crowd, clamped and degenerate annotations, an
// image without annotations, one with only a crowd, two categories with non-contiguous ids listed
// out of order): fields, dtypes and shapes, field_batching (ABI 1.6), image order, boxes scaled
// exactly by the resize ratio and mirrored by the flip, crowds only in gt_*, skip_empty,
// contiguous_labels, ScaleJitter sizes, PLG-8 determinism, and every error message.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <opencv2/imgcodecs.hpp>

#include <doctest/doctest.h>

#include "fixtures.h"

namespace {

namespace fs = std::filesystem;
using tp::test::Dataset;
using tp::test::FakeConfig;
using tp::test::PluginLibrary;
using tp::test::Sample;

constexpr const char* kCocoDetectionId = "org.torchhost.coco_detection";

// Images (id: file, height x width): 3: a.png 50 x 30; 5: d.png 30 x 40 (only a crowd);
// 7: b.jpg 40 x 60; 12: sub/c.png 20 x 20 (no annotation). Listed out of id order.
// Categories 18 and 5 (contiguous: 5 -> 0, 18 -> 1). Annotations, in file order:
//   1: image 3, cat 18, [2, 4, 10, 20]                -> [2, 4, 12, 24]
//   2: image 7, cat 5,  [10.5, 5, 20, 15], area 250.5 -> [10.5, 5, 30.5, 20]
//   3: image 7, cat 18, [0, 0, 100, 100], crowd        -> gt only
//   4: image 7, cat 18, [50, 30, 20, 20]              -> clamped to [50, 30, 60, 40]
//   5: image 3, cat 5,  [5, 5, 0, 10]                 -> degenerate: gt only
//   6: image 5, cat 5,  [1, 1, 10, 10], crowd          -> gt only
//   7: image 3, cat 5,  [29.5, 2, 5, 5]               -> clamped to [29.5, 2, 30, 7]
constexpr const char* kJson = R"({
  "info": {"description": "test", "year": 2017},
  "licenses": [{"id": 1, "name": "x"}],
  "images": [
    {"id": 7, "file_name": "b.jpg", "width": 60, "height": 40, "license": 1},
    {"id": 12, "file_name": "sub/c.png", "width": 20, "height": 20},
    {"id": 3, "file_name": "a.png", "width": 30, "height": 50},
    {"id": 5, "file_name": "d.png", "width": 40, "height": 30}
  ],
  "annotations": [
    {"id": 1, "image_id": 3, "category_id": 18, "bbox": [2, 4, 10, 20], "area": 150.0, "iscrowd": 0,
     "segmentation": [[2, 4, 12, 4, 12, 24, 2, 24]]},
    {"id": 2, "image_id": 7, "category_id": 5, "bbox": [10.5, 5, 20, 15], "area": 250.5, "iscrowd": 0,
     "segmentation": [[10.5, 5, 30.5, 5, 30.5, 20]]},
    {"id": 3, "image_id": 7, "category_id": 18, "bbox": [0, 0, 100, 100], "area": 5000, "iscrowd": 1,
     "segmentation": {"counts": [0, 10, 20], "size": [40, 60]}},
    {"id": 4, "image_id": 7, "category_id": 18, "bbox": [50, 30, 20, 20], "area": 400, "iscrowd": 0},
    {"id": 5, "image_id": 3, "category_id": 5, "bbox": [5, 5, 0, 10], "area": 0, "iscrowd": 0},
    {"id": 6, "image_id": 5, "category_id": 5, "bbox": [1, 1, 10, 10], "area": 100, "iscrowd": 1},
    {"id": 7, "image_id": 3, "category_id": 5, "bbox": [29.5, 2, 5, 5], "iscrowd": 0}
  ],
  "categories": [{"id": 18, "name": "dog", "supercategory": "animal"}, {"id": 5, "name": "car"}]
})";

/// root/images/{a.png, b.jpg, d.png, sub/c.png} and root/instances.json (`json`).
fs::path write_set(const std::string& name, const std::string& json = kJson) {
  const fs::path root = tp::test::fresh_fixture_dir(name);
  fs::create_directories(root / "images" / "sub");
  REQUIRE(cv::imwrite((root / "images" / "a.png").string(), tp::test::gradient_image(50, 30, 1)));
  REQUIRE(cv::imwrite((root / "images" / "b.jpg").string(), tp::test::gradient_image(40, 60, 2)));
  REQUIRE(cv::imwrite((root / "images" / "d.png").string(), tp::test::gradient_image(30, 40, 3)));
  REQUIRE(cv::imwrite((root / "images" / "sub" / "c.png").string(), tp::test::gradient_image(20, 20, 4)));
  std::ofstream(root / "instances.json") << json;
  return root;
}

/// Every split reads the same set; min_size [15] and max_size 1000 unless a test changes them.
void configure_coco_detection(const PluginLibrary& lib, FakeConfig& cfg, const fs::path& root) {
  tp::test::fill_defaults(*lib.entry().descriptor_at(0), cfg);
  for (const char* prefix : {"", "val_", "test_"}) {
    cfg.values[std::string(prefix) + "images"] = (root / "images").string();
    cfg.values[std::string(prefix) + "annotations"] = (root / "instances.json").string();
  }
  cfg.values["min_size"] = std::vector<int64_t>{15};
  cfg.values["max_size"] = int64_t{1000};
}

bool is_f32(const DLTensor& t) { return t.dtype.code == kDLFloat && t.dtype.bits == 32; }
bool is_i64(const DLTensor& t) { return t.dtype.code == kDLInt && t.dtype.bits == 64; }

template <typename T>
std::vector<T> values(const Sample& s, const char* name) {
  const auto v = s.values<T>(name);
  return std::vector<T>(v.begin(), v.end());
}

/// `create` of `split` fails with `code`; returns the message.
std::string create_error(PluginLibrary& lib, const FakeConfig& cfg, const char* split, tp_status code) {
  void* self = nullptr;
  CHECK(lib.dataset_table(kCocoDetectionId).create(&lib.host.host, &cfg.view, split, &self) == code);
  CHECK(self == nullptr);
  return lib.host.last_error;
}

bool contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return true;
  MESSAGE("'" << part << "' not in: " << text);
  return false;
}

}  // namespace

TEST_CASE("coco_detection: val fields, dtypes and shapes; ascending image ids; boxes scaled by the resize") {
  const fs::path root = write_set("coco_fields");
  PluginLibrary lib("coco_detection");
  FakeConfig cfg;
  configure_coco_detection(lib, cfg, root);
  Dataset val(lib, kCocoDetectionId, cfg, "val");
  REQUIRE(val.size() == 4);  // val keeps every image, also the one without annotations

  std::vector<int64_t> ids;
  for (uint64_t i = 0; i < val.size(); ++i) ids.push_back(val.get(i).values<int64_t>("image_id")[0]);
  CHECK(ids == std::vector<int64_t>{3, 5, 7, 12});
  // Each sample named by its image file, in the same order (ABI 1.13): host predict's path member.
  CHECK(val.sample_keys() == std::vector<std::string>{(root / "images" / "a.png").string(), (root / "images" / "d.png").string(),
                                                      (root / "images" / "b.jpg").string(),
                                                      (root / "images" / "sub/c.png").string()});

  // Image 3 (50 x 30): scale = min(15 / 30, 1000 / 50) = 0.5 -> 25 x 15, every box exactly halved.
  const Sample a = val.get(0);
  CHECK(is_f32(a.tensor("image")));
  CHECK(a.shape("image") == std::vector<int64_t>{3, 25, 15});
  CHECK(is_f32(a.tensor("boxes")));
  CHECK(a.shape("boxes") == std::vector<int64_t>{2, 4});  // annotation 5 (width 0) dropped
  CHECK(values<float>(a, "boxes") == std::vector<float>{1, 2, 6, 12, 14.75f, 1, 15, 3.5f});
  CHECK(is_i64(a.tensor("labels")));
  CHECK(values<int64_t>(a, "labels") == std::vector<int64_t>{18, 5});
  CHECK(is_i64(a.tensor("image_id")));
  CHECK(a.tensor("image_id").ndim == 0);
  CHECK(is_i64(a.tensor("orig_size")));
  CHECK(values<int64_t>(a, "orig_size") == std::vector<int64_t>{50, 30});

  // Image 7 (40 x 60): scale = 15 / 40 = 0.375 -> 15 x int(22.5) = 15 x 22; x scales by the
  // float32 ratio 22 / 60 (torchvision's new_width / old_width), y by 15 / 40.
  const Sample b = val.get(2);
  CHECK(b.shape("image") == std::vector<int64_t>{3, 15, 22});
  const float rx = 22.0f / 60.0f, ry = 15.0f / 40.0f;
  CHECK(values<float>(b, "boxes") ==
        std::vector<float>{10.5f * rx, 5 * ry, 30.5f * rx, 20 * ry, 50 * rx, 30 * ry, 60 * rx, 40 * ry});
  CHECK(values<int64_t>(b, "labels") == std::vector<int64_t>{5, 18});  // the crowd (annotation 3) is not a box

  // Ground truth in original pixels, every annotation in file order: crowds, unclamped and
  // degenerate boxes included, with the annotation's area.
  CHECK(b.shape("gt_boxes") == std::vector<int64_t>{3, 4});
  CHECK(is_f32(b.tensor("gt_boxes")));
  CHECK(values<float>(b, "gt_boxes") == std::vector<float>{10.5f, 5, 30.5f, 20, 0, 0, 100, 100, 50, 30, 70, 50});
  CHECK(values<int64_t>(b, "gt_labels") == std::vector<int64_t>{5, 18, 18});
  CHECK(values<int64_t>(b, "gt_iscrowd") == std::vector<int64_t>{0, 1, 0});
  CHECK(is_f32(b.tensor("gt_areas")));
  CHECK(values<float>(b, "gt_areas") == std::vector<float>{250.5f, 5000, 400});
  CHECK(values<float>(a, "gt_areas") == std::vector<float>{150, 0, 25});  // annotation 7 has none: 5 x 5

  // Image 5 holds only a crowd: no box, one ground-truth object. Image 12 has none at all.
  const Sample d = val.get(1);
  CHECK(d.shape("boxes") == std::vector<int64_t>{0, 4});
  CHECK(d.shape("labels") == std::vector<int64_t>{0});
  CHECK(values<int64_t>(d, "gt_iscrowd") == std::vector<int64_t>{1});
  const Sample c = val.get(3);
  CHECK(c.shape("image") == std::vector<int64_t>{3, 15, 15});
  CHECK(c.shape("gt_boxes") == std::vector<int64_t>{0, 4});
  CHECK(values<int64_t>(c, "orig_size") == std::vector<int64_t>{20, 20});

  // max_size caps the longer side: image 7 with min_size 40, max_size 48 -> scale 0.8 -> 32 x 48.
  cfg.values["min_size"] = std::vector<int64_t>{40};
  cfg.values["max_size"] = int64_t{48};
  Dataset capped(lib, kCocoDetectionId, cfg, "val");
  const Sample bc = capped.get(2);
  CHECK(bc.shape("image") == std::vector<int64_t>{3, 32, 48});
  CHECK(values<float>(bc, "boxes")[2] == 30.5f * (48.0f / 60.0f));
}

TEST_CASE("coco_detection: normalised pixels; the train flip mirrors image and boxes") {
  const fs::path root = write_set("coco_flip");
  PluginLibrary lib("coco_detection");
  FakeConfig cfg;
  configure_coco_detection(lib, cfg, root);
  cfg.values["min_size"] = std::vector<int64_t>{30};  // image 3 keeps its 50 x 30: exact pixels
  cfg.values["mean"] = std::vector<double>{0.5, 0.25, 0.0};
  cfg.values["std"] = std::vector<double>{0.5, 0.25, 1.0};
  cfg.values["hflip"] = 0.0;
  Dataset plain(lib, kCocoDetectionId, cfg, "train");
  REQUIRE(plain.size() == 2);  // images 3 and 7; skip_empty drops 5 (crowd only) and 12
  cfg.values["hflip"] = 1.0;
  Dataset flipped(lib, kCocoDetectionId, cfg, "train");
  const Sample p = plain.get(0, 11), f = flipped.get(0, 11);
  REQUIRE(p.shape("image") == std::vector<int64_t>{3, 50, 30});
  REQUIRE(f.shape("image") == std::vector<int64_t>{3, 50, 30});
  const cv::Mat bgr = tp::test::gradient_image(50, 30, 1);
  const auto px = values<float>(p, "image"), fx = values<float>(f, "image");
  const float mean[3] = {0.5f, 0.25f, 0.f}, sd[3] = {0.5f, 0.25f, 1.f};
  for (int ch = 0; ch < 3; ++ch)
    for (int y = 0; y < 50; ++y)
      for (int x = 0; x < 30; ++x) {
        const float want = (bgr.at<cv::Vec3b>(y, x)[2 - ch] / 255.0f - mean[ch]) / sd[ch];
        const std::size_t at = static_cast<std::size_t>(ch * 1500 + y * 30 + x);
        REQUIRE(px[at] == doctest::Approx(want).epsilon(1e-6));
        REQUIRE(fx[static_cast<std::size_t>(ch * 1500 + y * 30 + (29 - x))] == px[at]);
      }
  // Boxes [2, 4, 12, 24] and [29.5, 2, 30, 7] mirrored in a 30-wide image: x -> 30 - x, swapped.
  CHECK(values<float>(p, "boxes") == std::vector<float>{2, 4, 12, 24, 29.5f, 2, 30, 7});
  CHECK(values<float>(f, "boxes") == std::vector<float>{18, 4, 28, 24, 0, 2, 0.5f, 7});
  CHECK(values<int64_t>(f, "labels") == std::vector<int64_t>{18, 5});
  // Train samples carry no ground-truth fields.
  CHECK(f.fields().size() == 5);
}

TEST_CASE("coco_detection: train draws min_size and the flip from the seed (PLG-8); ScaleJitter sizes") {
  const fs::path root = write_set("coco_train");
  PluginLibrary lib("coco_detection");
  FakeConfig cfg;
  configure_coco_detection(lib, cfg, root);
  cfg.values["min_size"] = std::vector<int64_t>{10, 20, 30};
  Dataset train(lib, kCocoDetectionId, cfg, "train");
  std::set<int64_t> shorter;
  std::set<float> first_x1;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    const Sample s = train.get(1, seed);  // image 7, 40 x 60
    const std::vector<int64_t> shape = s.shape("image");
    shorter.insert(shape[1]);
    CHECK(shape[2] == shape[1] * 3 / 2);
    const auto boxes = values<float>(s, "boxes");
    const float rx = static_cast<float>(shape[2]) / 60.0f;
    // Either [10.5, ..] scaled, or its mirror W - 30.5 * rx.
    CHECK((boxes[0] == 10.5f * rx || boxes[0] == static_cast<float>(shape[2]) - 30.5f * rx));
    first_x1.insert(boxes[0]);
    CHECK(s.bytes() == train.get(1, seed).bytes());  // same seed, same sample
  }
  CHECK(shorter == std::set<int64_t>{10, 20, 30});
  CHECK(first_x1.size() == 6);  // three sizes x flipped or not
  // Another worker with the same seed gives the same sample: only the seed counts.
  CHECK(train.get(0, 5, 0).bytes() == train.get(0, 5, 3).bytes());

  // ScaleJitter with scale_range [0.25, 0.25], target 120: r = min(120 / 40, 120 / 60) * 0.25 = 0.5.
  cfg.values["scale_jitter"] = std::vector<double>{0.25, 0.25};
  cfg.values["max_size"] = int64_t{120};
  Dataset fixed(lib, kCocoDetectionId, cfg, "train");
  CHECK(fixed.get(1, 3).shape("image") == std::vector<int64_t>{3, 20, 30});
  // [0.25, 1]: r in [0.5, 2) for image 7, the aspect kept as int(40 r) x int(60 r).
  cfg.values["scale_jitter"] = std::vector<double>{0.25, 1.0};
  Dataset jitter(lib, kCocoDetectionId, cfg, "train");
  std::set<int64_t> heights;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const std::vector<int64_t> shape = jitter.get(1, seed).shape("image");
    CHECK(shape[1] >= 20);
    CHECK(shape[1] <= 80);
    CHECK(std::abs(static_cast<double>(shape[2]) / static_cast<double>(shape[1]) - 1.5) < 0.1);
    heights.insert(shape[1]);
  }
  CHECK(heights.size() >= 10);
  // Val ignores scale_jitter and the seed: the last min_size.
  Dataset val(lib, kCocoDetectionId, cfg, "val");
  CHECK(val.get(2, 1).shape("image") == std::vector<int64_t>{3, 30, 45});
  CHECK(val.get(2, 1).bytes() == val.get(2, 2).bytes());
}

TEST_CASE("coco_detection: field_batching pads the image and makes the object fields ragged (ABI 1.6)") {
  const fs::path root = write_set("coco_batching");
  PluginLibrary lib("coco_detection");
  FakeConfig cfg;
  configure_coco_detection(lib, cfg, root);
  for (const char* split : {"train", "val", "test"}) {
    CAPTURE(split);
    Dataset ds(lib, kCocoDetectionId, cfg, split);
    const tp_field_batching_t* fields = nullptr;
    uint32_t count = 0;
    REQUIRE(ds.table().field_batching(ds.self(), &fields, &count) == TP_OK);
    const bool train = std::string(split) == "train";
    REQUIRE(count == (train ? 3u : 7u));
    CHECK(std::string(fields[0].name) == "image");
    CHECK(fields[0].batching == TP_BATCH_PAD);
    CHECK(fields[0].pad_value == 0.0);
    CHECK(fields[0].struct_size == sizeof(tp_field_batching_t));
    const std::vector<std::string> ragged = train ? std::vector<std::string>{"boxes", "labels"}
                                                  : std::vector<std::string>{"boxes", "labels", "gt_boxes", "gt_labels",
                                                                             "gt_iscrowd", "gt_areas"};
    for (uint32_t k = 1; k < count; ++k) {
      CHECK(std::string(fields[k].name) == ragged[k - 1]);
      CHECK(fields[k].batching == TP_BATCH_RAGGED);
    }
  }
}

TEST_CASE("coco_detection: skip_empty and contiguous_labels") {
  const fs::path root = write_set("coco_options");
  PluginLibrary lib("coco_detection");
  FakeConfig cfg;
  configure_coco_detection(lib, cfg, root);
  cfg.values["hflip"] = 0.0;
  cfg.values["skip_empty"] = false;
  Dataset all(lib, kCocoDetectionId, cfg, "train");
  REQUIRE(all.size() == 4);
  CHECK(all.get(3, 1).values<int64_t>("image_id")[0] == 12);
  CHECK(all.get(3, 1).shape("boxes") == std::vector<int64_t>{0, 4});

  cfg.values["skip_empty"] = true;
  cfg.values["contiguous_labels"] = true;
  Dataset kept(lib, kCocoDetectionId, cfg, "train");
  REQUIRE(kept.size() == 2);
  CHECK(kept.get(0, 1).values<int64_t>("image_id")[0] == 3);
  CHECK(kept.get(1, 1).values<int64_t>("image_id")[0] == 7);
  // Categories 5 and 18 -> 0 and 1 (ascending id, whatever the file order).
  CHECK(values<int64_t>(kept.get(0, 1), "labels") == std::vector<int64_t>{1, 0});
  Dataset val(lib, kCocoDetectionId, cfg, "val");
  CHECK(values<int64_t>(val.get(2), "gt_labels") == std::vector<int64_t>{0, 1, 1});

  // An image whose only non-crowd box is at most 1 pixel wide counts as empty (torchvision's
  // _has_only_empty_bbox); with nothing left the train split is refused.
  std::string json = kJson;
  const auto swap = [&](const std::string& from, const std::string& to) {
    const std::size_t at = json.find(from);
    REQUIRE(at != std::string::npos);
    json.replace(at, from.size(), to);
  };
  swap("[2, 4, 10, 20]", "[2, 4, 1, 20]");
  swap("[29.5, 2, 5, 5]", "[29.5, 2, 5, 1]");
  swap("[10.5, 5, 20, 15]", "[10.5, 5, 0.5, 15]");
  swap("[50, 30, 20, 20]", "[50, 30, 20, 0]");
  const fs::path empty_root = write_set("coco_options_empty", json);
  configure_coco_detection(lib, cfg, empty_root);
  CHECK(contains(create_error(lib, cfg, "train", TP_ERR_CONFIG),
                 "non-crowd box wider and taller than 1 pixel, so skip_empty leaves nothing to train on"));
  Dataset val_empty(lib, kCocoDetectionId, cfg, "val");  // val keeps them all
  CHECK(val_empty.size() == 4);
}

// A trial's contiguous labels 0..3 reached predictions and exports with no way back to the
// categories: no names (host export's torchhost.classes) and the category ids nowhere.
TEST_CASE("coco_detection: contiguous labels lend the category names (ABI 1.12) and log each label's category id") {
  const fs::path root = write_set("coco_class_names");
  PluginLibrary lib("coco_detection");
  FakeConfig cfg;
  configure_coco_detection(lib, cfg, root);
  cfg.values["contiguous_labels"] = true;
  const Dataset val(lib, kCocoDetectionId, cfg, "val");
  CHECK(val.class_names() == std::vector<std::string>{"car", "dog"});  // ids 5, 18: ascending id, not file order
  CHECK(contains(lib.host.logs.back(), "coco_detection (val): labels 0..1 are the category ids 5 (car), 18 (dog) of '" +
                                           (root / "instances.json").string() + "'"));
  // Category ids as labels: names only for some of 0..max id, which the host cannot take.
  cfg.values["contiguous_labels"] = false;
  CHECK(Dataset(lib, kCocoDetectionId, cfg, "val").class_names().empty());
  // `files` reads no JSON: no categories to name.
  cfg.values["contiguous_labels"] = true;
  cfg.values["files"] = std::vector<std::string>{(root / "images" / "a.png").string()};
  CHECK(Dataset(lib, kCocoDetectionId, cfg, "val").class_names().empty());
  cfg.values["files"] = std::vector<std::string>{};

  // A category without a usable name: the labels keep no names (the host would refuse the run for
  // one), and a warning says which and why.
  for (const auto& [from, to, why] :
       {std::tuple<std::string, std::string, std::string>{R"("name": "car")", R"("label": "car")", "has no `name`"},
        {R"("name": "car")", R"("name": "c\u0007r")", "holds the control character U+0007"},  // JSON's escape
        {R"("name": "car")", R"("name": "")", "has no `name`"}}) {
    CAPTURE(to);
    lib.host.logs.clear();
    lib.host.log_levels.clear();
    std::string json = kJson;
    json.replace(json.find(from), from.size(), to);
    configure_coco_detection(lib, cfg, write_set("coco_class_names_bad", json));
    cfg.values["contiguous_labels"] = true;
    const Dataset unnamed(lib, kCocoDetectionId, cfg, "train");
    CHECK(unnamed.class_names().empty());
    bool warned = false;
    for (std::size_t i = 0; i < lib.host.logs.size(); ++i)
      warned = warned || (lib.host.log_levels[i] == TP_LOG_WARNING &&
                          lib.host.logs[i].find("the category id 5 " + why) != std::string::npos &&
                          lib.host.logs[i].find("lends no class names") != std::string::npos);
    CHECK_MESSAGE(warned, lib.host.logs.back());
  }
}

TEST_CASE("coco_detection: num_classes refuses, at start-up, a label the model has no class for") {
  // Categories 5 and 18: with their ids as labels, a 10-class model would train 18 as background
  // (issue 41, item 10); the whole file is checked when the dataset is created.
  const fs::path root = write_set("coco_num_classes");
  PluginLibrary lib("coco_detection");
  FakeConfig cfg;
  configure_coco_detection(lib, cfg, root);
  cfg.values["num_classes"] = int64_t{10};
  const std::string error = create_error(lib, cfg, "train", TP_ERR_IO);
  CHECK(contains(error, "has category_id 18, label 18, not below num_classes = 10"));
  CHECK(contains(error, "contiguous_labels = true (labels 0..1)"));
  CHECK(contains(create_error(lib, cfg, "val", TP_ERR_IO), "not below num_classes = 10"));
  cfg.values["num_classes"] = int64_t{19};
  CHECK(Dataset(lib, kCocoDetectionId, cfg, "train").size() == 2);
  cfg.values["num_classes"] = int64_t{2};
  cfg.values["contiguous_labels"] = true;
  CHECK(Dataset(lib, kCocoDetectionId, cfg, "val").size() == 4);
}

TEST_CASE("coco_detection: a file_name outside the image directory is refused unless allow_outside_root") {
  // An absolute file_name or one climbing out with '..' read any file the user can (issue 41, item 11).
  std::string json = kJson;
  json.replace(json.find("sub/c.png"), 9, "sub/../../outside.png");
  const fs::path root = write_set("coco_outside_root", json);
  REQUIRE(cv::imwrite((root / "outside.png").string(), tp::test::gradient_image(20, 20, 4)));
  PluginLibrary lib("coco_detection");
  FakeConfig cfg;
  configure_coco_detection(lib, cfg, root);
  const std::string climbing = create_error(lib, cfg, "val", TP_ERR_CONFIG);
  CHECK(contains(climbing, "the image id 12 has the file_name 'sub/../../outside.png', which climbs out of it with '..'"));
  CHECK(contains(climbing, "allow_outside_root = true"));
  cfg.values["allow_outside_root"] = true;
  Dataset val(lib, kCocoDetectionId, cfg, "val");
  CHECK(val.get(3).values<int64_t>("image_id")[0] == 12); // read from outside, as asked

  std::string absolute = kJson;
  absolute.replace(absolute.find("sub/c.png"), 9, (root / "outside.png").string());
  const fs::path absolute_root = write_set("coco_absolute_name", absolute);
  configure_coco_detection(lib, cfg, absolute_root);
  cfg.values["allow_outside_root"] = false;
  CHECK(contains(create_error(lib, cfg, "val", TP_ERR_CONFIG), "outside.png', which is absolute")); // train skips it: no box
}

TEST_CASE("coco_detection: an image list without annotations (COCO's image_info_test-dev2017.json) serves the test split") {
  const fs::path root = write_set("coco_test_dev");
  std::ofstream(root / "image_info.json", std::ios::trunc)
      << R"({"images": [{"id": 9, "file_name": "b.jpg", "width": 60, "height": 40}, {"id": 2, "file_name": "a.png"}],
             "categories": [{"id": 1, "name": "person"}]})";
  PluginLibrary lib("coco_detection");
  FakeConfig cfg;
  configure_coco_detection(lib, cfg, root);
  cfg.values["test_annotations"] = (root / "image_info.json").string();
  const Dataset val(lib, kCocoDetectionId, cfg, "val");  // annotated: no warning
  CHECK(std::count(lib.host.log_levels.begin(), lib.host.log_levels.end(), TP_LOG_WARNING) == 0);
  Dataset test(lib, kCocoDetectionId, cfg, "test");
  REQUIRE(test.size() == 2);
  // host eval on it reported a loss and every mAP -1 without a word (a trial): now a warning says
  // why those numbers mean nothing and what to use instead.
  REQUIRE(lib.host.log_levels.back() == TP_LOG_WARNING);
  CHECK(contains(lib.host.logs.back(), "coco_detection (test): '" + (root / "image_info.json").string() +
                                           "' (key `test_annotations`) has 2 images and no annotations, so a loss or "
                                           "mAP computed on this split measures nothing"));
  CHECK(contains(lib.host.logs.back(), "host predict --split test"));
  const Sample a = test.get(0);
  CHECK(a.values<int64_t>("image_id")[0] == 2);
  CHECK(a.shape("image") == std::vector<int64_t>{3, 25, 15});
  CHECK(a.shape("boxes") == std::vector<int64_t>{0, 4});
  CHECK(a.shape("gt_boxes") == std::vector<int64_t>{0, 4});
  CHECK(a.shape("gt_areas") == std::vector<int64_t>{0});
  CHECK(test.get(1).values<int64_t>("image_id")[0] == 9);
  // As a train split it has nothing to learn from.
  cfg.values["annotations"] = (root / "image_info.json").string();
  CHECK(contains(create_error(lib, cfg, "train", TP_ERR_CONFIG), "skip_empty leaves nothing to train on"));
}

// A detection model could not predict on plain files: host predict --images refused its dataset
// for having no `files` key (a trial of the detection path), and so did the inference library.
TEST_CASE("coco_detection: `files` serves new images without annotations to val and test, as the split sizes them") {
  const fs::path root = write_set("coco_files");
  PluginLibrary lib("coco_detection");
  FakeConfig cfg;
  configure_coco_detection(lib, cfg, root);
  const Dataset split(lib, kCocoDetectionId, cfg, "val");
  cfg.values["val_annotations"] = std::string("/nowhere/instances.json"); // not read with `files`
  cfg.values["files"] = std::vector<std::string>{(root / "images" / "b.jpg").string(), (root / "images" / "a.png").string()};
  Dataset files(lib, kCocoDetectionId, cfg, "val");
  REQUIRE(files.size() == 2);
  const Sample b = files.get(0);
  CHECK(b.values<int64_t>("image_id")[0] == 1); // position + 1
  CHECK(files.get(1).values<int64_t>("image_id")[0] == 2);
  CHECK(b.shape("boxes") == std::vector<int64_t>{0, 4});
  CHECK(b.shape("gt_boxes") == std::vector<int64_t>{0, 4});
  CHECK(values<int64_t>(b, "orig_size") == std::vector<int64_t>{40, 60});
  // The same pixels as the split's sample of that file (a.png, id 3: the split's first, by id).
  const Sample a = files.get(1), from_split = split.get(0);
  REQUIRE(from_split.values<int64_t>("image_id")[0] == 3);
  CHECK(a.shape("image") == from_split.shape("image"));
  CHECK(values<float>(a, "image") == values<float>(from_split, "image"));
  // Train reads its annotations: `files` there is refused.
  CHECK(contains(create_error(lib, cfg, "train", TP_ERR_CONFIG), "`files` (images without annotations) serves the val "
                                                                 "and test splits only"));
}

// A trial's val file with two annotations sharing an id was read without a word: right here (both
// kept), but pycocotools keeps only the later and scored 0.1962 against coco_map's 0.2044.
TEST_CASE("coco_detection: annotations sharing an id are kept, with a warning naming the file, the id and both entries") {
  std::string json = kJson;
  json.replace(json.find(R"({"id": 4, "image_id": 7)"), 8, R"({"id": 2)");  // annotations[3] takes annotations[1]'s id
  const fs::path root = write_set("coco_shared_ann_id", json);
  PluginLibrary lib("coco_detection");
  FakeConfig cfg;
  configure_coco_detection(lib, cfg, root);
  Dataset val(lib, kCocoDetectionId, cfg, "val");
  CHECK(val.get(2).shape("gt_boxes") == std::vector<int64_t>{3, 4});  // image 7 keeps both (and its crowd)
  std::vector<std::string> warnings;
  for (std::size_t i = 0; i < lib.host.logs.size(); ++i)
    if (lib.host.log_levels[i] == TP_LOG_WARNING) warnings.push_back(lib.host.logs[i]);
  REQUIRE(warnings.size() == 1);
  CHECK(contains(warnings[0], "coco_detection: '" + (root / "instances.json").string() +
                                  "' (key `val_annotations`): annotations[1] and annotations[3] have the same id 2."));
  CHECK(contains(warnings[0], "pycocotools' COCO keeps only the later"));
  CHECK(contains(warnings[0], "give each annotation its own id"));
  // Without a clash (the shared test set), no warning.
  lib.host.logs.clear();
  lib.host.log_levels.clear();
  configure_coco_detection(lib, cfg, write_set("coco_unique_ann_id"));
  const Dataset unique(lib, kCocoDetectionId, cfg, "val");
  CHECK(std::count(lib.host.log_levels.begin(), lib.host.log_levels.end(), TP_LOG_WARNING) == 0);
}

TEST_CASE("coco_detection: configuration errors name the key and the fix") {
  const fs::path root = write_set("coco_config_errors");
  PluginLibrary lib("coco_detection");
  FakeConfig cfg;
  configure_coco_detection(lib, cfg, root);
  cfg.values["val_annotations"] = std::string();
  CHECK(contains(create_error(lib, cfg, "val", TP_ERR_CONFIG),
                 "coco_detection: the val split needs `val_images` and `val_annotations`"));
  cfg.values["test_images"] = std::string();
  CHECK(contains(create_error(lib, cfg, "test", TP_ERR_CONFIG), "the test split needs `test_images` and `test_annotations`"));
  cfg.values["min_size"] = std::vector<int64_t>{};
  CHECK(contains(create_error(lib, cfg, "train", TP_ERR_CONFIG), "min_size is empty"));
  cfg.values["min_size"] = std::vector<int64_t>{800};
  cfg.values["scale_jitter"] = std::vector<double>{0.0, 2.0};
  CHECK(contains(create_error(lib, cfg, "train", TP_ERR_CONFIG), "scale_jitter must be [0, 0] (off) or [lo, hi]"));
  cfg.values["scale_jitter"] = std::vector<double>{0.0, 0.0};
  cfg.values["std"] = std::vector<double>{0.2, 0.0, 0.2};
  CHECK(contains(create_error(lib, cfg, "train", TP_ERR_CONFIG), "std values must be > 0"));
}

TEST_CASE("coco_detection: file errors name the file, the key and what to do") {
  const fs::path root = write_set("coco_file_errors");
  PluginLibrary lib("coco_detection");
  FakeConfig cfg;
  configure_coco_detection(lib, cfg, root);
  const std::string json_path = (root / "instances.json").string();

  cfg.values["annotations"] = (root / "missing.json").string();
  CHECK(contains(create_error(lib, cfg, "train", TP_ERR_IO),
                 "cannot open '" + (root / "missing.json").string() + "': No such file or directory (key `annotations`)"));
  cfg.values["annotations"] = json_path;
  cfg.values["images"] = (root / "nowhere").string();
  CHECK(contains(create_error(lib, cfg, "train", TP_ERR_IO),
                 "the image directory '" + (root / "nowhere").string() + "' (key `images`) does not exist"));
  cfg.values["images"] = (root / "images").string();

  // Each broken file: what the message must say.
  std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"images\": [\n  {\"id\": 1,, }]}", "(key `val_annotations`) is not valid JSON: parse error at line 2, column 12"},
      {"[1, 2]", "its top level is not an object"},
      {R"({"images": [], "annotations": []})", "it has no `categories` array"},
      {R"({"annotations": [], "categories": []})", "it has no `images` array"},
      {R"({"images": {}, "annotations": [], "categories": []})", "`images` is not an array"},
      {R"({"images": [{"id": 1}], "annotations": [], "categories": []})", "images[0] (id 1) has no `file_name` string"},
      {R"({"images": [{"id": "x", "file_name": "a.png"}], "annotations": [], "categories": []})",
       "images[0]'s `id` is not an integer: \"x\""},
      {R"({"images": [{"id": 1, "file_name": "a.png"}, {"id": 1, "file_name": "b.jpg"}], "annotations": [], "categories": []})",
       "two `images` have the id 1"},
      {R"({"images": [{"id": 1, "file_name": "a.png"}], "categories": [{"id": 2}],
           "annotations": [{"id": 9, "image_id": 1, "category_id": 2, "bbox": [1, 2, 3]}]})",
       "annotations[0] (id 9) has no `bbox` of 4 numbers [x, y, width, height]: [1,2,3]"},
      {R"({"images": [{"id": 1, "file_name": "a.png"}], "categories": [{"id": 2}],
           "annotations": [{"id": 9, "image_id": 1, "category_id": 2, "bbox": [1, 2, 3, 4]},
                           {"id": 10, "image_id": 99, "category_id": 2, "bbox": [1, 2, 3, 4]}]})",
       "annotations[1] (id 10) has image_id 99, which no entry of `images` has"},
      {R"({"images": [{"id": 1, "file_name": "a.png"}], "categories": [{"id": 2}],
           "annotations": [{"id": 9, "image_id": 1, "category_id": 3, "bbox": [1, 2, 3, 4]}]})",
       "annotations[0] (id 9) has category_id 3, which no entry of `categories` has; add the category or remove the annotation"},
      {R"({"images": [{"id": 1, "file_name": "a.png"}], "categories": [{"id": 2}],
           "annotations": [{"id": 9, "image_id": 1, "category_id": 2, "bbox": [1, 2, -3, 4]}]})",
       "annotations[0] (id 9) has a bbox of negative size [1,2,-3,4] ([x, y, width, height]); fix or remove the annotation"},
  };
  // 100,000 nested `[` in a bbox (a 200 KB file) once overflowed the stack in the error path
  // (SIGSEGV in host train, plugins check and 2-rank runs); deep nesting elsewhere too.
  const std::string deep(100000, '[');
  const std::string header = R"({"images": [{"id": 1, "file_name": "a.png"}], "categories": [{"id": 2}], )";
  cases.push_back({header + R"("annotations": [{"id": 9, "image_id": 1, "category_id": 2, "bbox": )" + deep,
                   "annotations[0]'s `bbox` holds an array or an object; a bbox is [x, y, width, height]"});
  cases.push_back({header + R"("annotations": [{"id": 9, "segmentation": )" + deep,
                   "it nests arrays or objects deeper than 16 levels at annotations[0]"});
  cases.push_back({header + R"("info": )" + deep, "it nests arrays or objects deeper than 16 levels"});
  const std::string broken = (root / "broken.json").string();
  cfg.values["val_annotations"] = broken;
  for (const auto& [text, message] : cases) {
    CAPTURE(text.substr(0, 200));
    std::ofstream(broken, std::ios::trunc) << text;
    const std::string error = create_error(lib, cfg, "val", TP_ERR_IO);
    CHECK(contains(error, "coco_detection: '" + broken + "' (key `val_annotations`)"));
    CHECK(contains(error, message));
  }
}

TEST_CASE("coco_detection: an image that does not decode or has another size fails its sample, naming it") {
  const fs::path root = write_set("coco_sample_errors");
  std::ofstream(root / "images" / "b.jpg", std::ios::trunc) << "not a jpeg";
  REQUIRE(cv::imwrite((root / "images" / "a.png").string(), tp::test::gradient_image(30, 50, 1)));  // transposed
  PluginLibrary lib("coco_detection");
  FakeConfig cfg;
  configure_coco_detection(lib, cfg, root);
  Dataset val(lib, kCocoDetectionId, cfg, "val");
  const tp_worker_ctx_t ctx = tp::test::worker_ctx(1);
  Sample s;
  CHECK(val.try_get(2, &ctx, s) == TP_ERR_IO);
  CHECK(contains(lib.host.last_error, "coco_detection: cannot decode '" + (root / "images" / "b.jpg").string() +
                                          "' (not an image OpenCV's decoder reads: JPEG, PNG, BMP, WebP, TIFF and the "
                                          "other formats of docs/datasets.md); fix or remove the file "
                                          "(image id 7, file_name 'b.jpg' under `val_images`)"));
  CHECK(val.try_get(0, &ctx, s) == TP_ERR_IO);
  CHECK(contains(lib.host.last_error, "a.png' (image id 3) is 50x30 but the JSON says 30x50 (width x height)"));
  fs::remove(root / "images" / "sub" / "c.png");
  CHECK(val.try_get(3, &ctx, s) == TP_ERR_IO);
  CHECK(contains(lib.host.last_error, "cannot open '" + (root / "images" / "sub" / "c.png").string() +
                                          "': No such file or directory (image id 12, file_name 'sub/c.png'"));
  CHECK(val.try_get(1, &ctx, s) == TP_OK);  // the others still read
  // A header declaring more than max_image_pixels is refused before it is decoded (issue 41).
  tp::test::write_png_declaring(root / "images" / "a.png", 30000, 30000);
  CHECK(val.try_get(0, &ctx, s) == TP_ERR_IO);
  CHECK(contains(lib.host.last_error, "a.png' declares 30000 x 30000 = 900000000 pixels, more than max_image_pixels "
                                      "= 178956970"));
  CHECK(contains(lib.host.last_error, "(image id 3, file_name 'a.png' under `val_images`)"));
}
