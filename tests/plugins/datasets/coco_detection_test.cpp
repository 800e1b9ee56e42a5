// coco_detection.so through its C ABI on a tiny COCO set written at test time (PNG and JPEG images
// of different sizes made with OpenCV; a JSON with crowd, clamped and degenerate annotations, an
// image without annotations, one with only a crowd, two categories with non-contiguous ids listed
// out of order): fields, dtypes and shapes, field_batching (ABI 1.6), image order, boxes scaled
// exactly by the resize ratio and mirrored by the flip, crowds only in gt_*, skip_empty,
// contiguous_labels, ScaleJitter sizes, PLG-8 determinism, test-dev and `files` splits, class
// names. The refusals and warnings: coco_detection_errors_test.cpp.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <opencv2/imgcodecs.hpp>

#include <doctest/doctest.h>

#include "coco_support.h"

namespace {

namespace fs = std::filesystem;
using namespace tp::test::coco;
using tp::test::Dataset;
using tp::test::FakeConfig;
using tp::test::PluginLibrary;
using tp::test::Sample;

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
