// segmentation_folder.so's mask formats through its C ABI: grey and RGB masks with class_colors
// and num_classes, the warning for binary masks saved as 0/255 (where 255 is ignore_index), and
// mask_map / reduce_zero_label.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>

#include <doctest/doctest.h>

#include "segmentation_folder_support.h"

namespace {

namespace fs = std::filesystem;
using tp::test::Dataset;
using tp::test::FakeConfig;
using tp::test::PluginLibrary;
using tp::test::Sample;
using namespace tp::test::seg;

/// How many of `lib`'s log lines are warnings containing `text`.
int warnings_with(const PluginLibrary& lib, const std::string& text) {
  int count = 0;
  for (std::size_t i = 0; i < lib.host.logs.size(); ++i)
    count += lib.host.log_levels[i] == TP_LOG_WARNING && lib.host.logs[i].find(text) != std::string::npos;
  return count;
}

}  // namespace

TEST_CASE("segmentation_folder: grey and RGB masks, class_colors, num_classes") {
  const fs::path root = tp::test::fresh_fixture_dir("seg_rgb");
  fs::create_directories(root / "images");
  fs::create_directories(root / "masks");
  REQUIRE(cv::imwrite((root / "images" / "x.png").string(), cv::Mat(6, 8, CV_8UC3, cv::Scalar(10, 20, 30))));
  cv::Mat grey(6, 8, CV_8UC1, cv::Scalar(2));
  grey.at<uchar>(1, 3) = 7;
  REQUIRE(cv::imwrite((root / "masks" / "x.png").string(), grey));
  PluginLibrary lib("segmentation_folder");
  FakeConfig cfg;
  configure_segmentation_folder(lib, cfg, root);
  cfg.values["resize"] = std::vector<int64_t>{6, 8};
  {
    Dataset ds(lib, kSegmentationFolderId, cfg, "train");
    const Planes p = planes(ds.get(0, 1));
    CHECK(p.mask[0] == 2);
    CHECK(p.mask[1 * 8 + 3] == 7);
  }
  cfg.values["num_classes"] = int64_t{5};
  {
    Dataset ds(lib, kSegmentationFolderId, cfg, "train");
    Sample s;
    const tp_worker_ctx_t ctx = tp::test::worker_ctx(1);
    CHECK(ds.try_get(0, &ctx, s) == TP_ERR_IO);
    CHECK(lib.host.last_error.find("masks/x.png' has the value 7 at pixel (x 3, y 1)") != std::string::npos);
  }
  cfg.values["num_classes"] = int64_t{0};
  // An RGB mask: refused as class ids, mapped with class_colors (given in R, G, B).
  cv::Mat rgb(6, 8, CV_8UC3, cv::Scalar(0, 0, 128));  // BGR: red 128
  rgb.at<cv::Vec3b>(2, 5) = cv::Vec3b(0, 128, 0);       // green 128
  REQUIRE(cv::imwrite((root / "masks" / "x.png").string(), rgb));
  {
    Dataset ds(lib, kSegmentationFolderId, cfg, "train");
    Sample s;
    const tp_worker_ctx_t ctx = tp::test::worker_ctx(1);
    CHECK(ds.try_get(0, &ctx, s) == TP_ERR_CONFIG);
    CHECK(lib.host.last_error.find("masks/x.png' is an RGB PNG; set `class_colors`") != std::string::npos);
  }
  cfg.values["class_colors"] = std::vector<int64_t>{0, 0, 0, 128, 0, 0, 0, 128, 0};
  {
    Dataset ds(lib, kSegmentationFolderId, cfg, "train");
    const Planes p = planes(ds.get(0, 1));
    CHECK(p.mask[0] == 1);
    CHECK(p.mask[2 * 8 + 5] == 2);
    CHECK(std::count(p.mask.begin(), p.mask.end(), 1) == 47);
  }
  cfg.values["class_colors"] = std::vector<int64_t>{0, 0, 0, 128, 0, 0};
  {
    Dataset ds(lib, kSegmentationFolderId, cfg, "train");
    Sample s;
    const tp_worker_ctx_t ctx = tp::test::worker_ctx(1);
    CHECK(ds.try_get(0, &ctx, s) == TP_ERR_IO);
    CHECK(lib.host.last_error.find("has the colour (0, 128, 0) at pixel (x 5, y 2)") != std::string::npos);
  }
}


TEST_CASE("segmentation_folder: binary masks saved as 0/255 are warned of at create, and class_colors reads them") {
  // The dense trial's F1: every foreground pixel was the default ignore_index 255, so the run
  // learnt background alone and scored val/miou = 1 without a word.
  const fs::path root = tp::test::fresh_fixture_dir("seg_binary_255");
  fs::create_directories(root / "images");
  fs::create_directories(root / "masks");
  for (const char* stem : {"a", "b", "c"}) {
    REQUIRE(cv::imwrite((root / "images" / (std::string(stem) + ".png")).string(), cv::Mat(6, 8, CV_8UC3, cv::Scalar(9, 9, 9))));
    cv::Mat mask(6, 8, CV_8UC1, cv::Scalar(0));
    mask(cv::Rect(2, 1, 3, 3)).setTo(255);
    REQUIRE(cv::imwrite((root / "masks" / (std::string(stem) + ".png")).string(), mask));
  }
  PluginLibrary lib("segmentation_folder");
  FakeConfig cfg;
  configure_segmentation_folder(lib, cfg, root);
  cfg.values["resize"] = std::vector<int64_t>{6, 8};
  cfg.values["num_classes"] = int64_t{2};
  const std::string warning = "the 3 masks checked hold only the values 0 and 255, and 255 is ignore_index";
  {
    Dataset ds(lib, kSegmentationFolderId, cfg, "train");
    CHECK(warnings_with(lib, warning) == 1);
    CHECK(warnings_with(lib, "set class_colors = [0, 0, 0, 255, 255, 255]") == 1);
  }
  // The fix the warning names: 255 read as class 1, and no warning.
  cfg.values["class_colors"] = std::vector<int64_t>{0, 0, 0, 255, 255, 255};
  {
    Dataset ds(lib, kSegmentationFolderId, cfg, "train");
    CHECK(warnings_with(lib, warning) == 1);
    const Planes p = planes(ds.get(0, 1));
    CHECK(std::count(p.mask.begin(), p.mask.end(), 1) == 9);
    CHECK(std::count(p.mask.begin(), p.mask.end(), 0) == 39);
  }
  // VOC's masks: classes besides 0, and 255 on their borders: no warning.
  cfg.values["class_colors"] = std::vector<int64_t>{};
  cv::Mat voc(6, 8, CV_8UC1, cv::Scalar(0));
  voc(cv::Rect(2, 1, 3, 3)).setTo(255);
  voc.at<uchar>(2, 3) = 1;
  REQUIRE(cv::imwrite((root / "masks" / "b.png").string(), voc));
  {
    Dataset ds(lib, kSegmentationFolderId, cfg, "train");
    CHECK(warnings_with(lib, warning) == 1);
  }
}


TEST_CASE("segmentation_folder: mask_map and reduce_zero_label remap the mask's values; bad tables are refused") {
  // Cityscapes' labelIds and ADE20K's 0 = "other" needed their masks rewritten on disk (dense trial F8).
  const fs::path root = tp::test::fresh_fixture_dir("seg_value_map");
  fs::create_directories(root / "images");
  fs::create_directories(root / "masks");
  REQUIRE(cv::imwrite((root / "images" / "x.png").string(), cv::Mat(6, 8, CV_8UC3, cv::Scalar(10, 20, 30))));
  cv::Mat grey(6, 8, CV_8UC1, cv::Scalar(7));  // Cityscapes' road
  grey.at<uchar>(1, 3) = 26;                    // car
  grey.at<uchar>(2, 2) = 0;                     // unlabeled
  grey.at<uchar>(4, 4) = 40;                    // past the table: kept
  REQUIRE(cv::imwrite((root / "masks" / "x.png").string(), grey));
  PluginLibrary lib("segmentation_folder");
  FakeConfig cfg;
  configure_segmentation_folder(lib, cfg, root);
  cfg.values["resize"] = std::vector<int64_t>{6, 8};
  std::vector<int64_t> city(34, 255);  // labelId -> trainId, the rest ignored
  city[7] = 0;
  city[26] = 13;
  cfg.values["mask_map"] = city;
  {
    Dataset ds(lib, kSegmentationFolderId, cfg, "train");
    const Planes p = planes(ds.get(0, 1));
    CHECK(p.mask[0] == 0);
    CHECK(p.mask[1 * 8 + 3] == 13);
    CHECK(p.mask[2 * 8 + 2] == 255);
    CHECK(p.mask[4 * 8 + 4] == 40);
  }
  cfg.values["mask_map"] = std::vector<int64_t>{};
  cfg.values["reduce_zero_label"] = true;
  {
    Dataset ds(lib, kSegmentationFolderId, cfg, "train");
    const Planes p = planes(ds.get(0, 1));
    CHECK(p.mask[0] == 6);
    CHECK(p.mask[1 * 8 + 3] == 25);
    CHECK(p.mask[2 * 8 + 2] == 255);  // 0 -> ignore_index
  }
  const auto create_error = [&] {
    void* self = nullptr;
    const tp_status status = lib.dataset_table(kSegmentationFolderId).create(&lib.host.host, &cfg.view, "train", &self);
    CHECK(self == nullptr);
    return status == TP_ERR_CONFIG ? lib.host.last_error : std::string("status ") + std::to_string(status);
  };
  cfg.values["mask_map"] = std::vector<int64_t>{0, 1};
  CHECK(create_error().find("mask_map and reduce_zero_label both remap") != std::string::npos);
  cfg.values["reduce_zero_label"] = false;
  cfg.values["mask_map"] = std::vector<int64_t>{0, 300};
  CHECK(create_error().find("mask_map[1] is 300") != std::string::npos);
}

TEST_CASE("segmentation_folder: a mask of another size fails its sample; swapped sides name EXIF orientation") {
  const fs::path root = tp::test::fresh_fixture_dir("seg_mask_size");
  fs::create_directories(root / "images");
  fs::create_directories(root / "masks");
  REQUIRE(cv::imwrite((root / "images" / "x.png").string(), cv::Mat(6, 8, CV_8UC3, cv::Scalar(10, 20, 30))));
  REQUIRE(cv::imwrite((root / "masks" / "x.png").string(), cv::Mat(8, 6, CV_8UC1, cv::Scalar(1))));
  PluginLibrary lib("segmentation_folder");
  FakeConfig cfg;
  configure_segmentation_folder(lib, cfg, root);
  cfg.values["resize"] = std::vector<int64_t>{6, 8};
  const auto error = [&] {
    Dataset ds(lib, kSegmentationFolderId, cfg, "train");
    Sample s;
    const tp_worker_ctx_t ctx = tp::test::worker_ctx(1);
    CHECK(ds.try_get(0, &ctx, s) == TP_ERR_IO);
    return lib.host.last_error;
  };
  const std::string swapped = error();
  CHECK(swapped.find("is 6x8 but its image") != std::string::npos);
  CHECK(swapped.find("The sides are swapped: the file is probably a photo with an EXIF orientation") != std::string::npos);
  REQUIRE(cv::imwrite((root / "masks" / "x.png").string(), cv::Mat(5, 8, CV_8UC1, cv::Scalar(1))));
  const std::string other = error();
  CHECK(other.find("is 8x5 but its image") != std::string::npos);
  CHECK(other.find("EXIF") == std::string::npos);
}
