// image_folder.so's encoded images (plugin ABI 1.11, tp_encoded_image_t) through its C ABI: the
// declaration per split and the key each refusal names, and the contract a host's device decoder
// implements: decoding the handed-over bytes, cutting `image_box`, resizing with OpenCV's
// semantics, flipping and normalising here, independently of the plugin's code, gives the plugin's
// own CPU pixels (fast_decode = false) bit for bit, for JPEGs of odd sizes, portrait, landscape,
// grey, and small ones where RandomResizedCrop falls back to its central crop.
#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <doctest/doctest.h>

#include "image_folder_support.h"

using namespace tp::test::image_folder;

namespace {

/// A textured BGR image (a gradient plus a pattern, so a crop one pixel off changes the pixels).
cv::Mat textured_image(int h, int w, int salt) {
  cv::Mat m = tp::test::gradient_image(h, w, salt);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      cv::Vec3b& px = m.at<cv::Vec3b>(y, x);
      for (int c = 0; c < 3; ++c) px[c] = static_cast<uchar>((px[c] + (x * 7 + y * 13 + c * 5 + salt) % 37) % 256);
    }
  return m;
}

std::vector<unsigned char> file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// One class folder "a" of JPEGs, in file-name order: landscape 97 x 131, portrait 141 x 83, grey
/// 64 x 64, 150 x 6 (too narrow for any of RandomResizedCrop's 10 attempts: its central fallback),
/// a small 17 x 23 (the crop is enlarged) and 40 x 40; plus "b" with one PNG when `with_png`.
struct JpegFolder {
  std::filesystem::path root;
  std::vector<cv::Size> sizes;  // width x height, per sample
};

JpegFolder write_jpegs(const std::string& name, bool with_png = false) {
  JpegFolder f;
  f.root = tp::test::fresh_fixture_dir(name);
  std::filesystem::create_directories(f.root / "a");
  const std::vector<std::pair<int, int>> hw = {{97, 131}, {141, 83}, {64, 64}, {150, 6}, {17, 23}, {40, 40}};
  for (std::size_t i = 0; i < hw.size(); ++i) {
    const cv::Mat img = textured_image(hw[i].first, hw[i].second, static_cast<int>(11 * i));
    cv::Mat written = img;
    if (i == 2) cv::cvtColor(img, written, cv::COLOR_BGR2GRAY);  // a one-channel (grey) JPEG
    REQUIRE(cv::imwrite((f.root / "a" / ("img_" + std::to_string(i) + ".jpg")).string(), written,
                        {cv::IMWRITE_JPEG_QUALITY, 90}));
    f.sizes.emplace_back(hw[i].second, hw[i].first);
  }
  if (with_png) {
    std::filesystem::create_directories(f.root / "b");
    REQUIRE(cv::imwrite((f.root / "b" / "img.png").string(), textured_image(30, 20, 3)));
    f.sizes.emplace_back(20, 30);
  }
  return f;
}

/// The recipe the brief names (random_resized_crop, hflip, resize + center_crop, mean/std) at a
/// small size, with the full-scale decode the encoded form is defined against.
void configure_recipe(const PluginLibrary& lib, FakeConfig& cfg, const std::filesystem::path& root) {
  configure(lib, cfg, root);
  cfg.values["val_root"] = root.string();
  cfg.values["random_resized_crop"] = std::vector<int64_t>{24};
  cfg.values["hflip"] = 0.5;
  cfg.values["resize"] = std::vector<int64_t>{28};
  cfg.values["center_crop"] = std::vector<int64_t>{24};
  cfg.values["mean"] = std::vector<double>{0.485, 0.456, 0.406};
  cfg.values["std"] = std::vector<double>{0.229, 0.224, 0.225};
  cfg.values["fast_decode"] = false;
}

/// The one entry of encoded_images, which must be "image".
tp_encoded_image_t declaration(const Dataset& ds) {
  REQUIRE((ds.table().encoded_images != nullptr));
  const tp_encoded_image_t* images = nullptr;
  uint32_t count = 0;
  REQUIRE(ds.table().encoded_images(ds.self(), &images, &count) == TP_OK);
  REQUIRE(count == 1);
  REQUIRE(images[0].struct_size == sizeof(tp_encoded_image_t));
  REQUIRE(std::string(images[0].name) == "image");
  return images[0];
}

/// What a device decoder does with the encoded form, written from the ABI's text alone: decode
/// the bytes (EXIF ignored), cut the box, resize to out_height x out_width (INTER_AREA when
/// shrinking in both directions, INTER_LINEAR otherwise), mirror when flip, then
/// (rgb / 255 - mean[c]) / std[c] per RGB channel, as float [3][h][w].
std::vector<float> device_decoder_reference(const Sample& encoded, const tp_encoded_image_t& decl) {
  const std::vector<unsigned char> bytes = bytes_of(encoded);
  const std::array<int32_t, 7> box = box_of(encoded);
  const cv::Mat full = cv::imdecode(bytes, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
  REQUIRE(full.rows == box[5]);
  REQUIRE(full.cols == box[6]);
  REQUIRE(0 <= box[0]);
  REQUIRE(box[0] < box[2]);
  REQUIRE(box[2] <= box[6]);
  REQUIRE(0 <= box[1]);
  REQUIRE(box[1] < box[3]);
  REQUIRE(box[3] <= box[5]);
  const cv::Mat crop = full(cv::Rect(box[0], box[1], box[2] - box[0], box[3] - box[1])).clone();  // the crop alone
  const int oh = decl.out_height, ow = decl.out_width;
  cv::Mat sized = crop;
  if (crop.rows != oh || crop.cols != ow) {
    const bool shrink = crop.cols >= ow && crop.rows >= oh;
    if (!shrink && (crop.cols > ow || crop.rows > oh)) {
      // One side shrinks, the other grows: area along the first, then bilinear (data trial F10).
      cv::Mat narrowed;
      cv::resize(crop, narrowed, cv::Size(std::min(crop.cols, ow), std::min(crop.rows, oh)), 0, 0, cv::INTER_AREA);
      cv::resize(narrowed, sized, cv::Size(ow, oh), 0, 0, cv::INTER_LINEAR);
    } else {
      cv::resize(crop, sized, cv::Size(ow, oh), 0, 0, shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
    }
  }
  cv::Mat flipped = sized;
  if (box[4] != 0) cv::flip(sized, flipped, 1);
  std::vector<float> out(static_cast<std::size_t>(3 * oh * ow));
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < oh; ++y)
      for (int x = 0; x < ow; ++x) {
        const float v = static_cast<float>(flipped.at<cv::Vec3b>(y, x)[2 - c]);
        out[static_cast<std::size_t>((c * oh + y) * ow + x)] = (v / 255.0f - decl.mean[c]) / decl.std[c];
      }
  return out;
}

/// torchvision's Resize([s]) + CenterCrop([c]) as one crop of the original (the plugin's CPU
/// path), computed here from the formula: x0, y0, x1, y1.
std::array<int32_t, 4> resize_center_crop_box(int height, int width, int s, int c) {
  const bool portrait = height >= width;
  const int shorter = portrait ? width : height, longer = portrait ? height : width;
  const int new_long = static_cast<int>(static_cast<int64_t>(s) * longer / shorter);
  const int rh = portrait ? new_long : s, rw = portrait ? s : new_long;
  // Python's round, as torchvision's center_crop: a half to the even neighbour.
  const double top = std::nearbyint((rh - c) / 2.0), left = std::nearbyint((rw - c) / 2.0);
  const double sy = static_cast<double>(height) / rh, sx = static_cast<double>(width) / rw;
  const int x0 = static_cast<int>(std::lround(left * sx)), y0 = static_cast<int>(std::lround(top * sy));
  return {x0, y0, std::max(x0 + 1, static_cast<int>(std::lround((left + c) * sx))),
          std::max(y0 + 1, static_cast<int>(std::lround((top + c) * sy)))};
}

}  // namespace

TEST_CASE("image_folder encoded: the declaration of the recipe, per split") {
  const JpegFolder f = write_jpegs("if_encoded_decl");
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure_recipe(lib, cfg, f.root);
  for (const char* split : {"train", "val"}) {
    CAPTURE(split);
    Dataset ds(lib, kId, cfg, split);
    const tp_encoded_image_t d = declaration(ds);
    CHECK(d.available == 1);
    CHECK(d.reason == nullptr);
    CHECK(d.out_height == 24);
    CHECK(d.out_width == 24);
    CHECK(d.mean[0] == 0.485f);
    CHECK(d.mean[2] == 0.406f);
    CHECK(d.std[1] == 0.224f);
    CHECK(d.channels_last == 0);
  }
  SUBCASE("defaults: mean 0, std 1; channels_last as set; resize = [h, w] alone is a fixed size") {
    FakeConfig plain;
    configure(lib, plain, f.root);
    plain.values["resize"] = std::vector<int64_t>{20, 30};
    plain.values["channels_last"] = true;
    Dataset ds(lib, kId, plain, "train");
    const tp_encoded_image_t d = declaration(ds);
    CHECK(d.available == 1);
    CHECK(d.out_height == 20);
    CHECK(d.out_width == 30);
    CHECK(d.mean[1] == 0.0f);
    CHECK(d.std[0] == 1.0f);
    CHECK(d.channels_last == 1);
  }
}

TEST_CASE("image_folder encoded: each key that changes decoded pixels makes train unavailable, naming it") {
  const JpegFolder f = write_jpegs("if_encoded_refused");
  PluginLibrary lib("image_folder");
  struct Case {
    const char* key;
    void (*set)(FakeConfig&);
  };
  const Case cases[] = {
      {"rand_augment", [](FakeConfig& c) { c.values["rand_augment"] = std::vector<int64_t>{2, 9}; }},
      {"trivial_augment", [](FakeConfig& c) { c.values["trivial_augment"] = true; }},
      {"random_erasing", [](FakeConfig& c) { c.values["random_erasing"] = 0.25; }},
      {"brightness", [](FakeConfig& c) { c.values["brightness"] = 0.4; }},
      {"contrast", [](FakeConfig& c) { c.values["contrast"] = 0.4; }},
      {"saturation", [](FakeConfig& c) { c.values["saturation"] = 0.4; }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.key);
    FakeConfig cfg;
    configure_recipe(lib, cfg, f.root);
    c.set(cfg);
    Dataset train(lib, kId, cfg, "train");
    const tp_encoded_image_t d = declaration(train);
    CHECK(d.available == 0);
    REQUIRE(d.reason != nullptr);
    CHECK_MESSAGE(std::string(d.reason).find(c.key) != std::string::npos, d.reason);
    // Asked for the encoded form anyway, an unavailable field stays pixels.
    const Sample s = encoded_sample(train, 0, 5);
    CHECK(s.tensor("image").dtype.code == kDLFloat);
    CHECK(s.fields().size() == 2);
    // The key is train only: val ignores it and stays available.
    Dataset val(lib, kId, cfg, "val");
    CHECK(declaration(val).available == 1);
  }
  SUBCASE("two keys at once are both named") {
    FakeConfig cfg;
    configure_recipe(lib, cfg, f.root);
    cfg.values["brightness"] = 0.4;
    cfg.values["random_erasing"] = 0.25;
    Dataset train(lib, kId, cfg, "train");
    const std::string reason = declaration(train).reason;
    CHECK(reason.find("random_erasing and brightness") != std::string::npos);
  }
  SUBCASE("an output size that is not fixed (resize = [s] alone) names the size keys") {
    FakeConfig cfg;
    configure(lib, cfg, f.root);
    cfg.values["resize"] = std::vector<int64_t>{28};
    Dataset ds(lib, kId, cfg, "train");
    const tp_encoded_image_t d = declaration(ds);
    CHECK(d.available == 0);
    CHECK(std::string(d.reason).find("center_crop") != std::string::npos);
  }
}

TEST_CASE("image_folder encoded: interpolation = \"bicubic\" makes every split unavailable, naming the key") {
  // The device kernel resizes bilinearly: a bicubic run decodes on the CPU, val included (migration F13).
  const JpegFolder f = write_jpegs("if_encoded_bicubic");
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure_recipe(lib, cfg, f.root);
  cfg.values["interpolation"] = std::string("bicubic");
  cfg.values["brightness"] = 0.4;
  for (const char* split : {"train", "val"}) {
    CAPTURE(split);
    Dataset ds(lib, kId, cfg, split);
    const tp_encoded_image_t d = declaration(ds);
    CHECK(d.available == 0);
    REQUIRE(d.reason != nullptr);
    const std::string reason = d.reason;
    CHECK_MESSAGE(reason.find("interpolation = \"bicubic\"") != std::string::npos, reason);
    // Train names its other key too; val ignores brightness.
    CHECK((reason.find("interpolation = \"bicubic\" and brightness change decoded pixels") != std::string::npos) ==
          (std::string(split) == "train"));
    if (std::string(split) == "val")
      CHECK_MESSAGE(reason.find("so this split's images are decoded on the CPU") != std::string::npos, reason);
  }
}

TEST_CASE("image_folder encoded: the box is the CPU path's crop; decoding it as the ABI says gives the CPU pixels bit for bit") {
  const JpegFolder f = write_jpegs("if_encoded_pixels");
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure_recipe(lib, cfg, f.root);
  for (const char* split : {"train", "val"}) {
    CAPTURE(split);
    const bool train = std::string(split) == "train";
    Dataset ds(lib, kId, cfg, split);
    REQUIRE(ds.size() == f.sizes.size());
    const tp_encoded_image_t decl = declaration(ds);
    std::set<std::array<int32_t, 7>> boxes;
    int flips = 0, draws = 0;
    for (uint64_t i = 0; i < ds.size(); ++i)
      for (uint64_t seed : {1u, 2u, 3u, 42u, 1234u, 99991u, 7777777u}) {
        CAPTURE(i);
        CAPTURE(seed);
        const Sample pixels = ds.get(i, seed);
        const Sample encoded = encoded_sample(ds, i, seed);
        // The fields: "image" bytes, "image_box", "label" as on the CPU path.
        REQUIRE(encoded.fields().size() == 3);
        CHECK(std::string(encoded.fields()[0].name) == "image");
        CHECK(std::string(encoded.fields()[1].name) == "image_box");
        CHECK(label_of(encoded) == label_of(pixels));
        CHECK(bytes_of(encoded) == file_bytes(f.root / "a" / ("img_" + std::to_string(i) + ".jpg")));
        const std::array<int32_t, 7> box = box_of(encoded);
        CHECK(box[5] == f.sizes[i].height);
        CHECK(box[6] == f.sizes[i].width);
        if (train) {
          boxes.insert(box);
          flips += box[4];
          ++draws;
          if (i == 3) {  // 150 x 6: every attempt fails; the central crop at aspect 3/4
            CHECK(box == std::array<int32_t, 7>{0, 71, 6, 79, box[4], 150, 6});
          }
        } else {
          const std::array<int32_t, 4> want = resize_center_crop_box(f.sizes[i].height, f.sizes[i].width, 28, 24);
          CHECK(std::array<int32_t, 4>{box[0], box[1], box[2], box[3]} == want);
          CHECK(box[4] == 0);  // val never flips
        }
        // The contract the host's decoder implements reproduces the CPU path exactly.
        int h = 0, w = 0;
        const std::vector<float> cpu = chw(pixels, &h, &w);
        REQUIRE(h == decl.out_height);
        REQUIRE(w == decl.out_width);
        CHECK(max_abs_diff(device_decoder_reference(encoded, decl), cpu) == 0.0f);
        // The same seed gives the same encoded sample (PLG-8).
        CHECK(encoded_sample(ds, i, seed).bytes() == encoded.bytes());
      }
    if (train) {
      CHECK(boxes.size() > 20);       // the crops really vary with the seed
      CHECK(flips > draws / 4);        // hflip = 0.5 flips some ...
      CHECK(flips < 3 * draws / 4);    // ... and not all
    }
  }
}

TEST_CASE("image_folder encoded: a PNG is handed over with size 0 x 0; a bad file fails as on the CPU path") {
  const JpegFolder f = write_jpegs("if_encoded_png", /*with_png=*/true);
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure_recipe(lib, cfg, f.root);
  Dataset ds(lib, kId, cfg, "train");
  REQUIRE(ds.size() == 7);
  const Sample png = encoded_sample(ds, 6, 9);
  CHECK(bytes_of(png) == file_bytes(f.root / "b" / "img.png"));
  const std::array<int32_t, 7> box = box_of(png);
  CHECK(box[0] == 0);
  CHECK(box[2] == 0);
  CHECK(box[5] == 0);  // the host asks for this sample's pixels instead
  CHECK(box[6] == 0);
  CHECK(label_of(png) == 1);

  SUBCASE("a truncated JPEG fails its sample with the CPU path's message") {
    const std::vector<unsigned char> whole = file_bytes(f.root / "a" / "img_0.jpg");
    std::ofstream(f.root / "a" / "img_0.jpg", std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(whole.data()), static_cast<std::streamsize>(whole.size() / 2));
    tp_worker_ctx_t ctx = tp::test::worker_ctx(3);
    Sample s;
    CHECK(ds.try_get(0, &ctx, s) == TP_ERR_IO);
    const std::string cpu_error = lib.host.last_error;
    ctx.encoded_images = 1;
    CHECK(ds.try_get(0, &ctx, s) == TP_ERR_IO);
    CHECK(lib.host.last_error == cpu_error);
    CHECK(cpu_error.find("truncated JPEG") != std::string::npos);
  }
  SUBCASE("more pixels than max_image_pixels fails its sample in both forms") {
    FakeConfig small;
    configure_recipe(lib, small, f.root);
    small.values["max_image_pixels"] = int64_t{1000};
    Dataset limited(lib, kId, small, "train");
    tp_worker_ctx_t ctx = tp::test::worker_ctx(3);
    ctx.encoded_images = 1;
    Sample s;
    CHECK(limited.try_get(0, &ctx, s) == TP_ERR_IO);
    CHECK(lib.host.last_error.find("max_image_pixels") != std::string::npos);
  }
}
