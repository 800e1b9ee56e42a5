// segmentation_folder.so through its C ABI on image/mask folders written at test time: pairing
// and order, field dtypes and shapes, palette masks read as indices (PNGs written here with zlib,
// independently of the plugin's libpng reader), joint geometry (image and mask move together,
// padding carries 0 / ignore_index), PLG-8 determinism, fixed train sizes, the val split's
// field_batching (ABI 1.6) and the errors that name the offending file. The mask formats:
// segmentation_folder_masks_test.cpp.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>

#include <doctest/doctest.h>

#include "fixtures.h"
#include "segmentation_folder_support.h"

namespace {

namespace fs = std::filesystem;
using tp::test::Dataset;
using tp::test::FakeConfig;
using tp::test::PluginLibrary;
using tp::test::Sample;
using namespace tp::test::seg;

}  // namespace

TEST_CASE("segmentation_folder: pairs by stem in sorted order; palette masks read as indices; exact pixels") {
  const fs::path root = write_split("seg_pairs", {{"b", 12, 16}, {"a", 9, 7}, {"sub/c", 10, 10}});
  PluginLibrary lib("segmentation_folder");
  FakeConfig cfg;
  configure_segmentation_folder(lib, cfg, root);
  cfg.values["val_root"] = root.string();  // val: no resize, natural sizes
  Dataset val(lib, kSegmentationFolderId, cfg, "val");
  REQUIRE(val.size() == 3);
  const std::vector<std::pair<int, int>> sizes{{9, 7}, {12, 16}, {10, 10}};  // a, b, sub/c
  // Each sample named by its image file (ABI 1.13): host predict's path column.
  CHECK(val.sample_keys() == std::vector<std::string>{(root / "images" / "a.png").string(), (root / "images" / "b.png").string(),
                                                      (root / "images" / "sub/c.png").string()});
  const int salts[] = {1, 0, 2};                                              // written b, a, sub/c
  for (uint64_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    const Sample s = val.get(i);
    const Planes p = planes(s);
    const auto [h, w] = sizes[i];
    CHECK(p.h == h);
    CHECK(p.w == w);
    const std::vector<uint8_t> ids = block_ids(h, w, salts[i]);
    CHECK(std::equal(p.mask.begin(), p.mask.end(), ids.begin()));  // indices 0..5 and 255, not colours
    for (size_t k = 0; k < ids.size(); ++k) REQUIRE(p.red[k] == (ids[k] == 255 ? 250 : ids[k] * 30));
  }
}

TEST_CASE("segmentation_folder: an image without a mask fails create, naming the expected mask file") {
  const fs::path root = write_split("seg_missing", {{"a", 8, 8}, {"b", 8, 8}});
  fs::remove(root / "masks" / "b.png");
  PluginLibrary lib("segmentation_folder");
  FakeConfig cfg;
  configure_segmentation_folder(lib, cfg, root);
  cfg.values["resize"] = std::vector<int64_t>{8, 8};
  void* self = nullptr;
  CHECK(lib.dataset_table(kSegmentationFolderId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_IO);
  CHECK(self == nullptr);
  CHECK(lib.host.last_error.find("no mask for image '" + (root / "images" / "b.png").string() + "': '" +
                                 (root / "masks" / "b.png").string() + "' does not exist") != std::string::npos);
  // A list file naming a stem with no image names the stem.
  std::ofstream(root / "train.txt") << "a\n\n# comment\nzzz\n";
  fs::remove(root / "images" / "b.png");
  cfg.values["list"] = (root / "train.txt").string();
  CHECK(lib.dataset_table(kSegmentationFolderId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_IO);
  CHECK(lib.host.last_error.find("lists 'zzz'") != std::string::npos);
}

TEST_CASE("segmentation_folder: a link loop under image_dir is not followed, warned once; a link to itself skipped") {
  // The ops trial (finding 5, image_folder's; this scan was the same walk): a link back up the
  // tree ended create with "cannot scan ...: Too many levels of symbolic links", and so did a
  // link to itself.
  const fs::path root = write_split("seg_loops", {{"a", 8, 8}, {"sub/b", 8, 8}});
  fs::create_directory_symlink("..", root / "images" / "sub" / "up");
  fs::create_symlink("self.png", root / "images" / "self.png");
  PluginLibrary lib("segmentation_folder");
  FakeConfig cfg;
  configure_segmentation_folder(lib, cfg, root);
  cfg.values["resize"] = std::vector<int64_t>{8, 8};
  Dataset ds(lib, kSegmentationFolderId, cfg, "train");
  CHECK(ds.size() == 2);
  int warned = 0;
  for (std::size_t i = 0; i < lib.host.logs.size(); ++i)
    warned += lib.host.log_levels[i] == TP_LOG_WARNING &&
              lib.host.logs[i].find("'sub/up' under image_dir links back to a folder it is inside") != std::string::npos;
  CHECK(warned == 1);
}

TEST_CASE("segmentation_folder: a mask or an image declaring more than max_image_pixels fails its sample") {
  const fs::path root = write_split("seg_bomb", {{"a", 8, 8}, {"b", 8, 8}});
  tp::test::write_png_declaring(root / "masks" / "b.png", 30000, 30000);
  PluginLibrary lib("segmentation_folder");
  FakeConfig cfg;
  configure_segmentation_folder(lib, cfg, root);
  cfg.values["resize"] = std::vector<int64_t>{8, 8};
  Dataset ds(lib, kSegmentationFolderId, cfg, "train");
  const tp_worker_ctx_t ctx = tp::test::worker_ctx(0);
  Sample s;
  CHECK(ds.try_get(0, &ctx, s) == TP_OK);
  CHECK(ds.try_get(1, &ctx, s) == TP_ERR_IO);
  CHECK(lib.host.last_error.find("masks/b.png' declares 30000 x 30000 = 900000000 pixels, more than "
                                 "max_image_pixels = 178956970") != std::string::npos);
  cfg.values["max_image_pixels"] = int64_t{63};  // the 8 x 8 image of a: 64 pixels
  Dataset small(lib, kSegmentationFolderId, cfg, "train");
  CHECK(small.try_get(0, &ctx, s) == TP_ERR_IO);
  CHECK(lib.host.last_error.find("images/a.png' declares 8 x 8 = 64 pixels, more than max_image_pixels = 63") !=
        std::string::npos);
}

TEST_CASE("segmentation_folder: a listed stem outside image_dir and mask_dir is refused unless allow_outside_root") {
  // A stem "../x" or "/x" reached any file the user can read (issue 41, item 11).
  const fs::path root = write_split("seg_outside", {{"a", 8, 8}, {"b", 8, 8}});
  PluginLibrary lib("segmentation_folder");
  FakeConfig cfg;
  configure_segmentation_folder(lib, cfg, root);
  cfg.values["resize"] = std::vector<int64_t>{8, 8};
  cfg.values["list"] = (root / "train.txt").string();
  void* self = nullptr;
  for (const std::string& stem : {std::string("../images/a"), (root / "images" / "a").string()}) {
    std::ofstream(root / "train.txt", std::ios::trunc) << "b\n" << stem << "\n";
    CHECK(lib.dataset_table(kSegmentationFolderId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
    CHECK(self == nullptr);
    CHECK(lib.host.last_error.find("lists '" + stem + "', which " +
                                   (stem[0] == '/' ? "is absolute" : "climbs out of it with '..'")) != std::string::npos);
  }
  // Allowed, the stem is taken as written: images/../images/a.png.
  std::ofstream(root / "train.txt", std::ios::trunc) << "b\n../images/a\n";
  cfg.values["allow_outside_root"] = true;
  Dataset listed(lib, kSegmentationFolderId, cfg, "train");
  CHECK(listed.size() == 2);
}

TEST_CASE("segmentation_folder: train samples all have the crop size; image and mask move together; PLG-8") {
  const fs::path root = write_split("seg_train", {{"a", 20, 30}, {"b", 41, 17}, {"c", 9, 12}});
  PluginLibrary lib("segmentation_folder");
  FakeConfig cfg;
  configure_segmentation_folder(lib, cfg, root);
  cfg.values["crop_size"] = std::vector<int64_t>{16, 24};
  cfg.values["hflip"] = 0.5;
  Dataset train(lib, kSegmentationFolderId, cfg, "train");
  int flipped_or_shifted = 0, padded = 0;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    for (uint64_t i = 0; i < 3; ++i) {
      CAPTURE(seed);
      CAPTURE(i);
      const Sample s = train.get(i, seed);
      CHECK(s.bytes() == train.get(i, seed, /*worker=*/2).bytes());  // PLG-8: the seed decides, not the worker
      const Planes p = planes(s);
      REQUIRE(p.h == 16);
      REQUIRE(p.w == 24);
      // Crop, flip and pad are integer moves: every pixel's mask is what its red channel encodes,
      // and padded pixels are image 0 with mask ignore_index 255.
      for (size_t k = 0; k < p.mask.size(); ++k) {
        const int64_t m = p.mask[k];
        const bool pad = s.values<float>("image")[16 * 24 + k] == 0.0f && p.red[k] == 0 && m == 255;
        padded += pad;
        if (!pad) REQUIRE(p.red[k] == (m == 255 ? 250 : m * 30));
      }
      flipped_or_shifted += s.bytes() != train.get(i, seed + 100).bytes();
    }
  }
  CHECK(padded > 0);  // c (9 x 12) and b (17 wide) are padded to 16 x 24
  // Another seed moves the crop and the flip: a has 5 x 7 offsets, b 26 tops, c (smaller than
  // the crop) only the flip, so about 30 of the 36 samples change (27 measured).
  CHECK(flipped_or_shifted >= 24);
}

TEST_CASE("segmentation_folder: the recipe (random_resize, crop, flip, jitter) is reproducible from the seed") {
  const fs::path root = write_split("seg_recipe", {{"a", 40, 60}, {"b", 50, 35}});
  PluginLibrary lib("segmentation_folder");
  FakeConfig cfg;
  configure_segmentation_folder(lib, cfg, root);
  cfg.values["random_resize"] = std::vector<int64_t>{20, 80};
  cfg.values["crop_size"] = std::vector<int64_t>{32};
  cfg.values["hflip"] = 0.5;
  cfg.values["brightness"] = 0.3;
  cfg.values["mean"] = std::vector<double>{0.485, 0.456, 0.406};
  cfg.values["std"] = std::vector<double>{0.229, 0.224, 0.225};
  Dataset train(lib, kSegmentationFolderId, cfg, "train");
  Dataset again(lib, kSegmentationFolderId, cfg, "train");
  std::set<std::vector<uint8_t>> distinct;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    const Sample s = train.get(1, seed);
    CHECK(s.shape("image") == std::vector<int64_t>{3, 32, 32});
    CHECK(s.shape("mask") == std::vector<int64_t>{32, 32});
    CHECK(again.get(1, seed).bytes() == s.bytes());
    for (int64_t m : s.values<int64_t>("mask")) REQUIRE(((m >= 0 && m < 6) || m == 255));
    distinct.insert(s.bytes());
  }
  CHECK(distinct.size() == 8);
  // Without a random size step the train split has no fixed size: refused at create.
  cfg.values["random_resize"] = std::vector<int64_t>{};
  cfg.values["crop_size"] = std::vector<int64_t>{};
  void* self = nullptr;
  CHECK(lib.dataset_table(kSegmentationFolderId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
  CHECK(lib.host.last_error.find("fixed output size") != std::string::npos);
}

TEST_CASE("segmentation_folder: val keeps its resized sizes and declares image and mask padded (ABI 1.6)") {
  const fs::path root = write_split("seg_val", {{"a", 40, 60}, {"b", 50, 35}});
  PluginLibrary lib("segmentation_folder");
  FakeConfig cfg;
  configure_segmentation_folder(lib, cfg, root);
  cfg.values["crop_size"] = std::vector<int64_t>{32};
  cfg.values["resize"] = std::vector<int64_t>{20};
  cfg.values["val_root"] = root.string();
  cfg.values["ignore_index"] = int64_t{200};
  Dataset val(lib, kSegmentationFolderId, cfg, "val");
  REQUIRE((val.table().field_batching != nullptr));
  const tp_field_batching_t* fields = nullptr;
  uint32_t count = 0;
  REQUIRE(val.table().field_batching(val.self(), &fields, &count) == TP_OK);
  REQUIRE(count == 2);
  CHECK(std::string(fields[0].name) == "image");
  CHECK(fields[0].batching == TP_BATCH_PAD);
  CHECK(fields[0].pad_value == 0.0);
  CHECK(std::string(fields[1].name) == "mask");
  CHECK(fields[1].batching == TP_BATCH_PAD);
  CHECK(fields[1].pad_value == 200.0);
  CHECK(fields[1].struct_size == sizeof(tp_field_batching_t));
  // Shorter side 20: a (40 x 60) -> 20 x 30, b (50 x 35) -> int(20 * 50 / 35) = 28 x 20; val ignores seeds.
  CHECK(val.get(0, 1).shape("mask") == std::vector<int64_t>{20, 30});
  CHECK(val.get(1, 1).shape("image") == std::vector<int64_t>{3, 28, 20});
  CHECK(val.get(1, 1).bytes() == val.get(1, 2).bytes());
  // Train stacks: it declares nothing.
  Dataset train(lib, kSegmentationFolderId, cfg, "train");
  REQUIRE(train.table().field_batching(train.self(), &fields, &count) == TP_OK);
  CHECK(count == 0);
}

// A segmentation model could not predict on plain files: host predict --images refused its
// dataset for having no `files` key, and so did the inference library's run_files.
TEST_CASE("segmentation_folder: `files` serves new images without masks to val and test, transformed as val") {
  const fs::path root = write_split("seg_files", {{"a", 40, 60}, {"b", 50, 35}});
  PluginLibrary lib("segmentation_folder");
  FakeConfig cfg;
  configure_segmentation_folder(lib, cfg, root);
  cfg.values["resize"] = std::vector<int64_t>{20};
  cfg.values["val_root"] = root.string();
  const Dataset pairs(lib, kSegmentationFolderId, cfg, "val");
  cfg.values["files"] = std::vector<std::string>{(root / "images" / "b.png").string()};
  cfg.values["val_root"] = std::string("/nowhere"); // not listed with `files`
  Dataset files(lib, kSegmentationFolderId, cfg, "val");
  REQUIRE(files.size() == 1);
  const Sample b = files.get(0, 1);
  REQUIRE(b.fields().size() == 2); // the image and its file's size, no mask
  const auto size_of_b = b.values<int64_t>("orig_size");
  CHECK(std::vector<int64_t>(size_of_b.begin(), size_of_b.end()) == std::vector<int64_t>{50, 35});
  const Sample from_pairs = pairs.get(1, 1);
  const auto size_of_pair = from_pairs.values<int64_t>("orig_size");
  CHECK(std::vector<int64_t>(size_of_pair.begin(), size_of_pair.end()) == std::vector<int64_t>{50, 35});
  CHECK(b.shape("image") == from_pairs.shape("image"));
  const auto got = b.values<float>("image"), expected = from_pairs.values<float>("image");
  CHECK(std::equal(got.begin(), got.end(), expected.begin(), expected.end()));
  const tp_field_batching_t* fields = nullptr;
  uint32_t count = 0;
  REQUIRE(files.table().field_batching(files.self(), &fields, &count) == TP_OK);
  REQUIRE(count == 1);
  CHECK(std::string(fields[0].name) == "image");
  void* self = nullptr;
  cfg.values["crop_size"] = std::vector<int64_t>{16}; // a train transform of its own is fine: `files` is not
  CHECK(lib.dataset_table(kSegmentationFolderId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
  CHECK(lib.host.last_error.find("`files` (images without masks) serves the val and test splits only") != std::string::npos);
}

// A segmenter's export named no classes: segmentation_folder lent none (its masks hold ids).
TEST_CASE("segmentation_folder: class_names are lent for the mask's values, one per class") {
  const fs::path root = write_split("seg_names", {{"a", 20, 30}});
  PluginLibrary lib("segmentation_folder");
  FakeConfig cfg;
  configure_segmentation_folder(lib, cfg, root);
  cfg.values["val_root"] = root.string();
  CHECK(Dataset(lib, kSegmentationFolderId, cfg, "val").class_names().empty());
  cfg.values["class_names"] = std::vector<std::string>{"background", "road", "car"};
  CHECK(Dataset(lib, kSegmentationFolderId, cfg, "val").class_names() ==
        std::vector<std::string>{"background", "road", "car"});
  cfg.values["num_classes"] = int64_t{4};
  void* self = nullptr;
  CHECK(lib.dataset_table(kSegmentationFolderId).create(&lib.host.host, &cfg.view, "val", &self) == TP_ERR_CONFIG);
  CHECK(lib.host.last_error.find("class_names names 3 classes but num_classes = 4") != std::string::npos);
}

TEST_CASE("segmentation_folder: a mean above 1 is refused as 0-255 values (data trial F13)") {
  const fs::path root = write_split("seg_mean_255", {{"a", 20, 30}});
  PluginLibrary lib("segmentation_folder");
  FakeConfig cfg;
  configure_segmentation_folder(lib, cfg, root);
  cfg.values["val_root"] = root.string();
  cfg.values["mean"] = std::vector<double>{123.675, 116.28, 103.53};
  void* self = nullptr;
  CHECK(lib.dataset_table(kSegmentationFolderId).create(&lib.host.host, &cfg.view, "val", &self) == TP_ERR_CONFIG);
  CHECK_MESSAGE(lib.host.last_error.find("segmentation_folder: mean = [123.675, 116.28, 103.53] holds a value above "
                                         "1") != std::string::npos,
                lib.host.last_error);
}

// The default `extensions` were .jpg .jpeg .png .bmp .webp while image_folder's became
// torchvision's IMG_EXTENSIONS (data trial F2): a .tif or .ppm image beside its mask was left
// out without a word. Masks are found by stem in mask_dir, so the image endings are free.
TEST_CASE("segmentation_folder: the default extensions are image_folder's (.tif, .ppm, .pgm images are paired)") {
  const fs::path root = write_split("seg_endings", {{"a", 9, 7}});
  const cv::Mat image = cv::imread((root / "images" / "a.png").string());
  REQUIRE(cv::imwrite((root / "images" / "b.tif").string(), image));
  REQUIRE(cv::imwrite((root / "images" / "c.ppm").string(), image));
  fs::copy_file(root / "masks" / "a.png", root / "masks" / "b.png");
  fs::copy_file(root / "masks" / "a.png", root / "masks" / "c.png");
  PluginLibrary lib("segmentation_folder");
  FakeConfig cfg;
  configure_segmentation_folder(lib, cfg, root);
  CHECK(std::get<std::vector<std::string>>(cfg.values["extensions"]) ==
        std::vector<std::string>{".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"});
  cfg.values["val_root"] = root.string();
  const Dataset val(lib, kSegmentationFolderId, cfg, "val");
  REQUIRE(val.size() == 3);
  CHECK(val.sample_keys()[1] == (root / "images" / "b.tif").string());
  const Planes a = planes(val.get(0)), b = planes(val.get(1)), c = planes(val.get(2));
  CHECK(b.red == a.red);  // lossless: the same pixels
  CHECK(c.red == a.red);
  CHECK(b.mask == a.mask);
}
