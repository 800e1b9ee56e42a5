// image_folder.so through its C ABI on image folders written at test time: labels and order,
// exact normalisation, resize / center_crop against OpenCV computed independently here,
// random transforms reproducible from the host seed, val splits, channels-last, CSV listings,
// the test split, `files` (host predict --images) (the listing cache, link loops and empty
// classes: image_folder_listing_test.cpp; broken and hostile files: image_folder_bad_files_test.cpp).
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <doctest/doctest.h>

#include "image_folder_support.h"

using namespace tp::test::image_folder;

TEST_CASE("image_folder: classes from sorted folder names, files in sorted order, exact pixels") {
  const Fixture f = write_folder("if_labels", 12, 16);
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  Dataset ds(lib, kId, cfg, "train");
  REQUIRE(ds.size() == 9);  // notes.txt is not listed
  CHECK(ds.class_names() == std::vector<std::string>{"bird", "cat", "dog"});  // lent for exports (ABI 1.12)
  // Each sample's file, in index order (ABI 1.13): host predict's path column.
  const std::vector<std::string> keys = ds.sample_keys();
  REQUIRE(keys.size() == 9);
  for (uint64_t i = 0; i < 9; ++i)
    CHECK(keys[i] == (f.root / std::vector<std::string>{"bird", "cat", "dog"}[i / 3] /
                      ("img_" + std::to_string(i % 3) + ".png")).string());
  for (uint64_t i = 0; i < 9; ++i) {
    const Sample s = ds.get(i, /*seed=*/i);
    CHECK(label_of(s) == static_cast<int64_t>(i / 3));  // bird 0, cat 1, dog 2
    CHECK(s.shape("label").empty());
    int h = 0, w = 0;
    const std::vector<float> got = chw(s, &h, &w);
    CHECK(h == 12);
    CHECK(w == 16);
    // No transform: exactly v / 255 in RGB order (PNG is lossless).
    CHECK(max_abs_diff(got, expected_chw(f.images[i / 3][i % 3])) == 0.0f);
  }
}

TEST_CASE("image_folder: mean/std normalisation is (v / 255 - mean) / std per RGB channel") {
  const Fixture f = write_folder("if_norm", 8, 8);
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  const std::vector<double> mean{0.485, 0.456, 0.406}, stdev{0.229, 0.224, 0.225};
  cfg.values["mean"] = mean;
  cfg.values["std"] = stdev;
  Dataset ds(lib, kId, cfg, "train");
  int h = 0, w = 0;
  const std::vector<float> got = chw(ds.get(4), &h, &w);
  std::vector<float> want = expected_chw(f.images[1][1]);
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < h * w; ++i) {
      float& v = want[c * h * w + i];
      v = (v - static_cast<float>(mean[c])) / static_cast<float>(stdev[c]);
    }
  CHECK(max_abs_diff(got, want) < 1e-5f);
}

// Data trial F13: mmcv/detectron2's ImageNet values, 0-255 ones, were accepted and trained on
// inputs around -2 (mean) or 1/255 of the intended scale (std) without a word.
TEST_CASE("image_folder: a mean or std above 1 is refused as 0-255 values, showing them divided by 255") {
  const Fixture f = write_folder("if_norm_255", 8, 8);
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  void* self = nullptr;
  cfg.values["mean"] = std::vector<double>{123.675, 116.28, 103.53};
  CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
  CHECK_MESSAGE(lib.host.last_error.find("image_folder: mean = [123.675, 116.28, 103.53] holds a value above 1, and "
                                         "these look like 0-255 values") != std::string::npos,
                lib.host.last_error);
  CHECK(lib.host.last_error.find("divide them by 255: mean = [0.485, 0.456, 0.406]") != std::string::npos);
  cfg.values["mean"] = std::vector<double>{0.485, 0.456, 0.406};
  cfg.values["std"] = std::vector<double>{58.395, 57.12, 57.375};
  CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "val", &self) == TP_ERR_CONFIG);
  CHECK_MESSAGE(lib.host.last_error.find("std = [0.229, 0.224, 0.225]") != std::string::npos, lib.host.last_error);
  // 1 itself and negative means are values of the [0, 1] scale.
  cfg.values["std"] = std::vector<double>{1.0, 1.0, 1.0};
  cfg.values["mean"] = std::vector<double>{-1.0, 0.0, 1.0};
  CHECK(Dataset(lib, kId, cfg, "train").size() == 9);
}

TEST_CASE("image_folder: interpolation is \"bilinear\" or \"bicubic\"; another value names the key and both") {
  const Fixture f = write_folder("if_interpolation", 8, 8);
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  void* self = nullptr;
  cfg.values["interpolation"] = std::string("bicubc");
  CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
  CHECK_MESSAGE(lib.host.last_error.find("image_folder: interpolation must be \"bilinear\"") != std::string::npos,
                lib.host.last_error);
  CHECK(lib.host.last_error.find("or \"bicubic\"") != std::string::npos);
  CHECK(lib.host.last_error.find("got \"bicubc\"") != std::string::npos);
  cfg.values["interpolation"] = std::string("bicubic");
  cfg.values["resize"] = std::vector<int64_t>{5};
  Dataset ds(lib, kId, cfg, "train");
  const Sample s = ds.get(0, 1);
  CHECK(s.shape("image") == std::vector<int64_t>{3, 5, 5});
}

TEST_CASE("image_folder: resize and center_crop match OpenCV computed independently") {
  const Fixture f = write_folder("if_geometry", 40, 60);
  PluginLibrary lib("image_folder");
  const cv::Mat& src = f.images[2][0];  // sample 6
  SUBCASE("resize = [20]: shorter side 20, longer int(20 * 60 / 40) = 30, area interpolation") {
    FakeConfig cfg;
  configure(lib, cfg, f.root);
    cfg.values["resize"] = std::vector<int64_t>{20};
    Dataset ds(lib, kId, cfg, "train");
    int h = 0, w = 0;
    const std::vector<float> got = chw(ds.get(6), &h, &w);
    CHECK(h == 20);
    CHECK(w == 30);
    cv::Mat ref;
    cv::resize(src, ref, cv::Size(30, 20), 0, 0, cv::INTER_AREA);
    CHECK(max_abs_diff(got, expected_chw(ref)) == 0.0f);
  }
  SUBCASE("resize = [h, w] shrinking one side and enlarging the other: area along the shrinking side first") {
    // Data trial F10: one bilinear cv::resize sampled a 600 x 24 text line's shrinking side without
    // a low-pass filter (24.5 grey levels from torchvision's antialias=True, 8.2 now). Stripes one
    // pixel wide show it: area averaging makes them grey, bilinear keeps a stripe or a gap.
    const std::filesystem::path root = tp::test::fresh_fixture_dir("if_mixed_resize");
    std::filesystem::create_directories(root / "a");
    cv::Mat stripes(24, 120, CV_8UC3);
    for (int y = 0; y < stripes.rows; ++y)
      for (int x = 0; x < stripes.cols; ++x)
        stripes.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uchar>(x % 2 * 255), static_cast<uchar>(y * 10),
                                                static_cast<uchar>((x % 3) * 100));
    REQUIRE(cv::imwrite((root / "a" / "s.png").string(), stripes));
    FakeConfig cfg;
    configure(lib, cfg, root);
    cfg.values["resize"] = std::vector<int64_t>{32, 40};  // height 24 -> 32, width 120 -> 40
    Dataset ds(lib, kId, cfg, "train");
    int h = 0, w = 0;
    const std::vector<float> got = chw(ds.get(0), &h, &w);
    CHECK(h == 32);
    CHECK(w == 40);
    cv::Mat narrowed, ref, one_pass;
    cv::resize(stripes, narrowed, cv::Size(40, 24), 0, 0, cv::INTER_AREA);
    cv::resize(narrowed, ref, cv::Size(40, 32), 0, 0, cv::INTER_LINEAR);
    CHECK(max_abs_diff(got, expected_chw(ref)) == 0.0f);
    cv::resize(stripes, one_pass, cv::Size(40, 32), 0, 0, cv::INTER_LINEAR);
    CHECK(max_abs_diff(got, expected_chw(one_pass)) > 0.4f);  // the aliased stripes of before
  }
  SUBCASE("center_crop = [10, 16]: offsets round((40-10)/2) = 15, round((60-16)/2) = 22, exact pixels") {
    FakeConfig cfg;
  configure(lib, cfg, f.root);
    cfg.values["center_crop"] = std::vector<int64_t>{10, 16};
    Dataset ds(lib, kId, cfg, "train");
    int h = 0, w = 0;
    const std::vector<float> got = chw(ds.get(6), &h, &w);
    CHECK(h == 10);
    CHECK(w == 16);
    CHECK(max_abs_diff(got, expected_chw(src(cv::Rect(22, 15, 16, 10)).clone())) == 0.0f);
  }
  SUBCASE("center_crop = [11, 15]: offsets 14.5 and 22.5 round half to even (Python's round, torchvision's)") {
    FakeConfig cfg;
    configure(lib, cfg, f.root);
    cfg.values["center_crop"] = std::vector<int64_t>{11, 15};
    Dataset ds(lib, kId, cfg, "train");
    int h = 0, w = 0;
    const std::vector<float> got = chw(ds.get(6), &h, &w);
    CHECK(h == 11);
    CHECK(w == 15);
    CHECK(max_abs_diff(got, expected_chw(src(cv::Rect(22, 14, 15, 11)).clone())) == 0.0f);  // not (23, 15)
  }
  SUBCASE("resize = [20] then center_crop = [16]: close to resizing the whole image and cropping") {
    FakeConfig cfg;
  configure(lib, cfg, f.root);
    cfg.values["resize"] = std::vector<int64_t>{20};
    cfg.values["center_crop"] = std::vector<int64_t>{16};
    Dataset ds(lib, kId, cfg, "train");
    int h = 0, w = 0;
    const std::vector<float> got = chw(ds.get(6), &h, &w);
    CHECK(h == 16);
    CHECK(w == 16);
    cv::Mat resized;
    cv::resize(src, resized, cv::Size(30, 20), 0, 0, cv::INTER_AREA);
    const cv::Mat ref = resized(cv::Rect(7, 2, 16, 16)).clone();  // round(14/2), round(4/2)
    // The plugin crops first and resizes only the crop (sub-pixel offsets rounded to whole
    // source pixels): on a smooth image that moves values by a few grey levels at most.
    CHECK(max_abs_diff(got, expected_chw(ref)) < 6.0f / 255.0f);
  }
}

TEST_CASE("image_folder: random transforms depend only on the host seed; val has none") {
  const Fixture f = write_folder("if_random", 48, 64);
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  cfg.values["random_resized_crop"] = std::vector<int64_t>{24};
  cfg.values["resize"] = std::vector<int64_t>{32};
  cfg.values["center_crop"] = std::vector<int64_t>{24};
  cfg.values["hflip"] = 0.5;
  cfg.values["brightness"] = 0.4;
  cfg.values["contrast"] = 0.4;
  cfg.values["saturation"] = 0.4;
  cfg.values["val_split"] = 0.34;  // 3 of 9 images
  Dataset train(lib, kId, cfg, "train");
  Dataset val(lib, kId, cfg, "val");
  CHECK(train.size() == 6);
  CHECK(val.size() == 3);
  std::set<std::vector<uint8_t>> distinct;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    const Sample a = train.get(1, seed, /*worker=*/0);
    const Sample b = train.get(1, seed, /*worker=*/3);
    CHECK(a.bytes() == b.bytes());  // same seed, any worker: identical
    CHECK(a.shape("image") == std::vector<int64_t>{3, 24, 24});
    distinct.insert(a.bytes());
  }
  CHECK(distinct.size() == 8);  // every seed a different crop / flip / jitter
  // Val: resize + center_crop only, whatever the seed.
  CHECK(val.get(0, 1).bytes() == val.get(0, 99).bytes());
  CHECK(val.get(0, 1).shape("image") == std::vector<int64_t>{3, 24, 24});
}

TEST_CASE("image_folder: hflip = 1 mirrors exactly") {
  const Fixture f = write_folder("if_flip", 10, 14);
  PluginLibrary lib("image_folder");
  FakeConfig plain;
  configure(lib, plain, f.root);
  FakeConfig flipped;
  configure(lib, flipped, f.root);
  flipped.values["hflip"] = 1.0;
  Dataset a(lib, kId, plain, "train");
  Dataset b(lib, kId, flipped, "train");
  int h = 0, w = 0;
  const std::vector<float> x = chw(a.get(2, 5), &h, &w);
  const std::vector<float> y = chw(b.get(2, 5), &h, &w);
  for (int c = 0; c < 3; ++c)
    for (int r = 0; r < h; ++r)
      for (int col = 0; col < w; ++col) CHECK(x[(c * h + r) * w + col] == y[(c * h + r) * w + (w - 1 - col)]);
}

TEST_CASE("image_folder: channels_last keeps shape [3, H, W] with HWC strides and the same values") {
  const Fixture f = write_folder("if_cl", 6, 10);
  PluginLibrary lib("image_folder");
  FakeConfig a_cfg;
  configure(lib, a_cfg, f.root);
  FakeConfig b_cfg;
  configure(lib, b_cfg, f.root);
  b_cfg.values["channels_last"] = true;
  Dataset a(lib, kId, a_cfg, "train");
  Dataset b(lib, kId, b_cfg, "train");
  const Sample sb = b.get(3);
  const DLTensor& t = sb.tensor("image");
  REQUIRE(t.strides != nullptr);
  CHECK(std::vector<int64_t>(t.strides, t.strides + 3) == std::vector<int64_t>{1, 30, 3});
  int h = 0, w = 0;
  CHECK(max_abs_diff(chw(a.get(3), &h, &w), chw(sb, &h, &w)) == 0.0f);
}

TEST_CASE("image_folder: val_root, csv listings and val_split partitions") {
  const Fixture f = write_folder("if_csv", 8, 8);
  PluginLibrary lib("image_folder");
  SUBCASE("csv with integer labels, header, comments, relative paths") {
    std::ofstream(f.root / "list.csv") << "path,label\n# comment\ncat/img_1.png,5\n\ndog/img_0.png,2\n";
    FakeConfig cfg;
  configure(lib, cfg, f.root);
    cfg.values["csv"] = (f.root / "list.csv").string();
    Dataset ds(lib, kId, cfg, "train");
    REQUIRE(ds.size() == 2);
    CHECK(label_of(ds.get(0)) == 5);
    CHECK(label_of(ds.get(1)) == 2);
    CHECK(ds.class_names().empty());  // integer labels have no names to lend
    int h = 0, w = 0;
    CHECK(max_abs_diff(chw(ds.get(0), &h, &w), expected_chw(f.images[1][1])) == 0.0f);
  }
  SUBCASE("csv with class names: ids by sorted name") {
    std::ofstream(f.root / "names.csv") << "dog/img_0.png,zebra\ncat/img_1.png,ant\n";
    FakeConfig cfg;
  configure(lib, cfg, f.root);
    cfg.values["csv"] = (f.root / "names.csv").string();
    Dataset ds(lib, kId, cfg, "train");
    CHECK(label_of(ds.get(0)) == 1);
    CHECK(label_of(ds.get(1)) == 0);
    CHECK(ds.class_names() == std::vector<std::string>{"ant", "zebra"});
  }
  SUBCASE("a malformed csv row is named by file and line") {
    std::ofstream(f.root / "bad.csv") << "cat/img_1.png,1\ndog/img_0.png,two\n";
    FakeConfig cfg;
  configure(lib, cfg, f.root);
    cfg.values["csv"] = (f.root / "bad.csv").string();
    void* self = nullptr;
    CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
    CHECK(lib.host.last_error.find("bad.csv:2") != std::string::npos);
  }
  SUBCASE("a csv row outside root is refused naming the file, line and path, unless allow_outside_root") {
    // Issue 58 (a low): `../` and absolute rows read any file the user can, where COCO file_names
    // and segmentation lists were already refused.
    const std::filesystem::path outside = f.root.parent_path() / "if_csv_outside.png";
    std::filesystem::copy_file(f.root / "cat" / "img_1.png", outside, std::filesystem::copy_options::overwrite_existing);
    for (const std::string& row :
         std::vector<std::string>{"../if_csv_outside.png", outside.string(), "cat/../../if_csv_outside.png"}) {
      CAPTURE(row);
      std::ofstream(f.root / "outside.csv") << "cat/img_1.png,1\n" << row << ",2\n";
      FakeConfig cfg;
      configure(lib, cfg, f.root);
      cfg.values["csv"] = (f.root / "outside.csv").string();
      void* self = nullptr;
      CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
      const std::string& e = lib.host.last_error;
      CHECK(e.find("outside.csv:2: the path '" + row + "' names a file outside `root` (" + f.root.string() + "): it " +
                   (row == outside.string() ? "is absolute" : "climbs out of it with '..'")) != std::string::npos);
      CHECK(e.find("set allow_outside_root = true") != std::string::npos);
      cfg.values["allow_outside_root"] = true;
      Dataset ds(lib, kId, cfg, "train");
      REQUIRE(ds.size() == 2);
      int h = 0, w = 0;
      CHECK(max_abs_diff(chw(ds.get(1), &h, &w), expected_chw(f.images[1][1])) == 0.0f);
    }
    // A '..' that stays inside root is the user's own path.
    std::ofstream(f.root / "inside.csv") << "cat/sub/../img_1.png,1\n";
    FakeConfig cfg;
    configure(lib, cfg, f.root);
    cfg.values["csv"] = (f.root / "inside.csv").string();
    CHECK(Dataset(lib, kId, cfg, "train").size() == 1);
  }
  SUBCASE("val_root reuses the class names of root") {
    FakeConfig cfg;
  configure(lib, cfg, f.root);
    cfg.values["val_root"] = f.root.string();
    Dataset val(lib, kId, cfg, "val");
    CHECK(val.size() == 9);
  }
  SUBCASE("a val_root whose class folders differ names the folders missing and extra") {
    const std::filesystem::path val_root = f.root.parent_path() / "if_csv_val_other";
    std::filesystem::remove_all(val_root);
    std::filesystem::create_directories(val_root / "cat");
    std::filesystem::create_directories(val_root / "cow");
    std::filesystem::copy_file(f.root / "cat" / "img_1.png", val_root / "cat" / "img_1.png");
    std::filesystem::copy_file(f.root / "cat" / "img_1.png", val_root / "cow" / "img_1.png");
    FakeConfig cfg;
    configure(lib, cfg, f.root);
    cfg.values["val_root"] = val_root.string();
    void* self = nullptr;
    CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "val", &self) == TP_ERR_CONFIG);
    CHECK(lib.host.last_error.find("class folders that differ from root's 3 (missing here: 'bird', 'dog'; not in root: 'cow')") !=
          std::string::npos);
    CHECK(lib.host.last_error.find("may be an empty folder") != std::string::npos);
  }
  SUBCASE("a val_root that does not exist is named as val_root, not root") {
    FakeConfig cfg;
    configure(lib, cfg, f.root);
    cfg.values["val_root"] = (f.root.parent_path() / "no_such_val").string();
    void* self = nullptr;
    CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "val", &self) == TP_ERR_CONFIG);
    CHECK(lib.host.last_error.find("image_folder: val_root '") != std::string::npos);
    CHECK(lib.host.last_error.find("set `val_root` to a folder") != std::string::npos);
  }
  SUBCASE("val_split: disjoint parts that cover the listing, fixed by split_seed") {
    FakeConfig cfg;
  configure(lib, cfg, f.root);
    cfg.values["val_split"] = 0.34;
    cfg.values["split_seed"] = int64_t{3};
    Dataset train(lib, kId, cfg, "train");
    Dataset val(lib, kId, cfg, "val");
    std::multiset<std::vector<uint8_t>> all;
    for (uint64_t i = 0; i < train.size(); ++i) all.insert(train.get(i).bytes());
    for (uint64_t i = 0; i < val.size(); ++i) all.insert(val.get(i).bytes());
    CHECK(all.size() == 9);
    CHECK(std::set<std::vector<uint8_t>>(all.begin(), all.end()).size() == 9);
  }
}

TEST_CASE("image_folder: JPEG reduced decoding stays close to a full decode") {
  const auto root = tp::test::fresh_fixture_dir("if_jpeg");
  std::filesystem::create_directories(root / "a");
  REQUIRE(cv::imwrite((root / "a" / "big.jpg").string(), tp::test::gradient_image(400, 600, 3),
                      {cv::IMWRITE_JPEG_QUALITY, 95}));
  PluginLibrary lib("image_folder");
  FakeConfig fast;
  configure(lib, fast, root);
  fast.values["resize"] = std::vector<int64_t>{48};
  fast.values["center_crop"] = std::vector<int64_t>{48};
  FakeConfig full;
  configure(lib, full, root);
  full.values["resize"] = std::vector<int64_t>{48};
  full.values["center_crop"] = std::vector<int64_t>{48};
  full.values["fast_decode"] = false;
  Dataset a(lib, kId, fast, "train");
  Dataset b(lib, kId, full, "train");
  int h = 0, w = 0;
  const std::vector<float> x = chw(a.get(0), &h, &w);
  CHECK(h == 48);
  CHECK(max_abs_diff(x, chw(b.get(0), &h, &w)) < 8.0f / 255.0f);
}

TEST_CASE("image_folder: the test split reads test_root like val, never the training root") {
  const Fixture f = write_folder("if_test_split", 8, 8);
  PluginLibrary lib("image_folder");
  void* self = nullptr;
  SUBCASE("without test_root/test_csv the test split is refused: root holds the training images") {
    FakeConfig cfg;
    configure(lib, cfg, f.root);
    CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "test", &self) == TP_ERR_CONFIG);
    CHECK(lib.host.last_error.find("test_root") != std::string::npos);
    CHECK(lib.host.last_error.find("training images") != std::string::npos);
  }
  SUBCASE("the schema's help (host plugins list --verbose) says so, not that \"\" means root (docs trial F2)") {
    const tp_descriptor_t& d = descriptor(lib);
    std::string help;
    for (uint32_t i = 0; i < d.key_count; ++i)
      if (std::string(d.keys[i].name) == "test_root") help = d.keys[i].help;
    INFO(help);
    CHECK(help.find("`root` of this table") == std::string::npos);
    CHECK(help.find("test_csv") != std::string::npos);
    CHECK(help.find("never `root`") != std::string::npos);
  }
  SUBCASE("test_root whose class folders differ from root's is refused") {
    const Fixture other = write_folder("if_test_split_other", 8, 8);
    std::filesystem::create_directories(other.root / "eel"); // a fourth class: labels would not agree
    REQUIRE(cv::imwrite((other.root / "eel" / "img_0.png").string(), tp::test::gradient_image(8, 8, 1)));
    FakeConfig cfg;
    configure(lib, cfg, f.root);
    cfg.values["test_root"] = other.root.string();
    CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "test", &self) == TP_ERR_CONFIG);
    CHECK(lib.host.last_error.find("test_root") != std::string::npos);
  }
  SUBCASE("test_root is read without augmentation") {
    FakeConfig cfg;
    configure(lib, cfg, f.root);
    cfg.values["test_root"] = f.root.string();
    cfg.values["hflip"] = 1.0; // train-only: the test split must not mirror
    Dataset test(lib, kId, cfg, "test");
    REQUIRE(test.size() == 9);
    int h = 0, w = 0;
    CHECK(label_of(test.get(4)) == 1);
    CHECK(max_abs_diff(chw(test.get(4), &h, &w), expected_chw(f.images[1][1])) == 0.0f);
  }
}

TEST_CASE("image_folder: `files` reads those files in that order without labels; the train split refuses it") {
  const Fixture f = write_folder("if_files", 8, 8);
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  cfg.values["hflip"] = 1.0;  // train-only: given files are read with the evaluation transform
  cfg.values["files"] = std::vector<std::string>{(f.root / "dog" / "img_2.png").string(),
                                                 (f.root / "bird" / "img_0.png").string()};
  for (const char* split : {"val", "test"}) {
    Dataset ds(lib, kId, cfg, split);
    REQUIRE(ds.size() == 2);
    CHECK(ds.class_names().empty());
    const Sample first = ds.get(0, /*seed=*/7);
    CHECK(first.fields().size() == 1);  // "image" alone: no label
    int h = 0, w = 0;
    CHECK(max_abs_diff(chw(first, &h, &w), expected_chw(f.images[2][2])) == 0.0f);
    CHECK(max_abs_diff(chw(ds.get(1), &h, &w), expected_chw(f.images[0][0])) == 0.0f);
  }
  void* self = nullptr;
  CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
  CHECK(lib.host.last_error.find("`files` (images without labels) serves the val and test splits only") !=
        std::string::npos);
}
