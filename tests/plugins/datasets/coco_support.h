// Test support for coco_detection.so (coco_detection_test.cpp, coco_detection_errors_test.cpp):
// a tiny COCO set written at test time and the plugin's config.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>

#include <doctest/doctest.h>

#include "fixtures.h"

namespace tp::test::coco {

namespace fs = std::filesystem;

inline constexpr const char* kCocoDetectionId = "org.torchhost.coco_detection";

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
inline constexpr const char* kJson = R"({
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

/// root/images/{a.png, b.jpg, d.png, sub/c.png} and root/instances.json (`json`), with a copy
/// train_instances.json for the train split.
inline fs::path write_set(const std::string& name, const std::string& json = kJson) {
  const fs::path root = tp::test::fresh_fixture_dir(name);
  fs::create_directories(root / "images" / "sub");
  REQUIRE(cv::imwrite((root / "images" / "a.png").string(), tp::test::gradient_image(50, 30, 1)));
  REQUIRE(cv::imwrite((root / "images" / "b.jpg").string(), tp::test::gradient_image(40, 60, 2)));
  REQUIRE(cv::imwrite((root / "images" / "d.png").string(), tp::test::gradient_image(30, 40, 3)));
  REQUIRE(cv::imwrite((root / "images" / "sub" / "c.png").string(), tp::test::gradient_image(20, 20, 4)));
  std::ofstream(root / "instances.json") << json;
  // The train split's own copy: a val split naming the train split's file is warned of.
  std::ofstream(root / "train_instances.json") << json;
  return root;
}

/// Every split reads the same set (train from its copy of the JSON); min_size [15] and max_size 1000 unless a test changes them.
inline void configure_coco_detection(const PluginLibrary& lib, FakeConfig& cfg, const fs::path& root) {
  tp::test::fill_defaults(*lib.entry().descriptor_at(0), cfg);
  for (const char* prefix : {"", "val_", "test_"}) {
    cfg.values[std::string(prefix) + "images"] = (root / "images").string();
    cfg.values[std::string(prefix) + "annotations"] = (root / (*prefix == '\0' ? "train_instances.json" : "instances.json")).string();
  }
  cfg.values["min_size"] = std::vector<int64_t>{15};
  cfg.values["max_size"] = int64_t{1000};
}

/// Whether a sample's field is float32, int64.
inline bool is_f32(const DLTensor& t) { return t.dtype.code == kDLFloat && t.dtype.bits == 32; }
inline bool is_i64(const DLTensor& t) { return t.dtype.code == kDLInt && t.dtype.bits == 64; }

/// Field `name` of `s` as a vector.
template <typename T>
inline std::vector<T> values(const Sample& s, const char* name) {
  const auto v = s.values<T>(name);
  return std::vector<T>(v.begin(), v.end());
}

/// `create` of `split` fails with `code`; returns the message.
inline std::string create_error(PluginLibrary& lib, const FakeConfig& cfg, const char* split, tp_status code) {
  void* self = nullptr;
  CHECK(lib.dataset_table(kCocoDetectionId).create(&lib.host.host, &cfg.view, split, &self) == code);
  CHECK(self == nullptr);
  return lib.host.last_error;
}

/// Whether `text` holds `part`; says what it lacks when not.
inline bool contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return true;
  MESSAGE("'" << part << "' not in: " << text);
  return false;
}

}  // namespace tp::test::coco
