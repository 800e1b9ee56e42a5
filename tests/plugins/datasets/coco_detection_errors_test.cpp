// coco_detection.so's refusals and warnings through its C ABI, on the tiny COCO set of
// coco_support.h with one thing broken at a time: every message names the file, the key, the
// entry and the fix; a label past num_classes, a file_name outside the image directory, shared
// annotation ids (a warning), bad configuration keys, unreadable and malformed files, an image
// that does not decode or has another size than its entry says.
#include <filesystem>
#include <fstream>
#include <string>
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

TEST_CASE("coco_detection: a val split reading the train split's annotations file is warned of") {
  // The README had said this was refused; it was accepted without a word (dense trial F14). An
  // overfit check does it on purpose, so it is a warning.
  const fs::path root = write_set("coco_val_is_train");
  PluginLibrary lib("coco_detection");
  FakeConfig cfg;
  configure_coco_detection(lib, cfg, root);
  cfg.values["val_annotations"] = cfg.values["annotations"];
  const Dataset val(lib, kCocoDetectionId, cfg, "val");
  int warned = 0;
  for (std::size_t i = 0; i < lib.host.logs.size(); ++i)
    warned += lib.host.log_levels[i] == TP_LOG_WARNING &&
              contains(lib.host.logs[i], "`val_annotations` is the train split's annotations file");
  CHECK(warned == 1);
  // The train split itself, and a val split with its own file, say nothing of it.
  lib.host.logs.clear();
  lib.host.log_levels.clear();
  const Dataset train(lib, kCocoDetectionId, cfg, "train");
  configure_coco_detection(lib, cfg, root);
  const Dataset own(lib, kCocoDetectionId, cfg, "val");
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
  // Data trial F13: detectron2's 0-255 values.
  cfg.values["std"] = std::vector<double>{58.395, 57.12, 57.375};
  CHECK(contains(create_error(lib, cfg, "train", TP_ERR_CONFIG),
                 "coco_detection: std = [58.395, 57.12, 57.375] holds a value above 1, and these look like 0-255 "
                 "values"));
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
       "annotations[0] (id 9) has a bbox of negative size [1,2,-3,4] ([x, y, width, height]); fix or remove the "
       "annotation, or set drop_negative_boxes = true"},
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

  // drop_negative_boxes: what torchvision's ConvertCocoPolysToMask also drops (it keeps x2 > x1 and y2 > y1),
  // the dropped annotations counted in one warning (the dense trial's F16).
  std::ofstream(broken, std::ios::trunc) << R"({"images": [{"id": 1, "file_name": "a.png", "width": 30, "height": 50}],
      "categories": [{"id": 2}], "annotations": [{"id": 9, "image_id": 1, "category_id": 2, "bbox": [1, 2, -3, 4]},
      {"id": 10, "image_id": 1, "category_id": 2, "bbox": [1, 2, 3, 4]}, {"id": 11, "image_id": 1, "category_id": 2,
      "bbox": [1, 2, 3, -4]}]})";
  cfg.values["drop_negative_boxes"] = true;
  lib.host.logs.clear();
  lib.host.log_levels.clear();
  Dataset kept(lib, kCocoDetectionId, cfg, "val");
  CHECK(kept.get(0).shape("gt_boxes") == std::vector<int64_t>{1, 4});
  int warned = 0;
  for (std::size_t i = 0; i < lib.host.logs.size(); ++i)
    warned += lib.host.log_levels[i] == TP_LOG_WARNING &&
              contains(lib.host.logs[i], "dropped 2 annotation(s) whose bbox has a negative width or height "
                                         "(drop_negative_boxes = true), the first annotations[0] (id 9) [1,2,-3,4]");
  CHECK(warned == 1);
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
  // Swapped sides: a phone photo the labelling tool showed upright (the dense trial's F7).
  CHECK(contains(lib.host.last_error, "The sides are swapped: the file is probably a photo with an EXIF orientation"));
  CHECK(contains(lib.host.last_error, "ImageOps.exif_transpose"));
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
