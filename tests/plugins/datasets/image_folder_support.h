// Shared by the image_folder C-ABI tests (image_folder_test.cpp, image_folder_bad_files_test.cpp,
// image_folder_augment_test.cpp):
// a scrambled class-folder fixture written at test time, the plugin's configuration with every
// key at its default, CHW readers of a sample with the OpenCV reference they compare to, and
// readers of a sample's encoded form (plugin ABI 1.11; webdataset_test.cpp too).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <doctest/doctest.h>

#include "fixtures.h"

namespace tp::test::image_folder {


using tp::test::Dataset;
using tp::test::FakeConfig;
using tp::test::PluginLibrary;
using tp::test::Sample;

inline constexpr const char* kId = "org.torchhost.image_folder";

struct Fixture {
  std::filesystem::path root;
  // class -> written images (BGR), in file-name order
  std::vector<std::vector<cv::Mat>> images;
};

/// root/{bird,cat,dog}/img_<k>.png, 3 images each, size h x w; written in scrambled order.
inline Fixture write_folder(const std::string& name, int h, int w) {
  Fixture f;
  f.root = tp::test::fresh_fixture_dir(name);
  const std::vector<std::string> classes{"dog", "bird", "cat"};  // created unsorted on purpose
  for (const auto& c : classes) std::filesystem::create_directories(f.root / c);
  std::filesystem::create_directories(f.root / "cat" / "sub");
  f.images.resize(3);
  const std::vector<std::string> sorted{"bird", "cat", "dog"};
  for (int c = 0; c < 3; ++c) {
    for (int k = 2; k >= 0; --k) {
      const cv::Mat img = tp::test::gradient_image(h, w, 17 * c + 5 * k);
      REQUIRE(cv::imwrite((f.root / sorted[c] / ("img_" + std::to_string(k) + ".png")).string(), img));
    }
    for (int k = 0; k < 3; ++k)
      f.images[c].push_back(cv::imread((f.root / sorted[c] / ("img_" + std::to_string(k) + ".png")).string()));
  }
  std::ofstream(f.root / "dog" / "notes.txt") << "not an image\n";  // ignored: not an image extension
  return f;
}

inline const tp_descriptor_t& descriptor(const PluginLibrary& lib) {
  REQUIRE(lib.entry().descriptor_count() == 1);
  return *lib.entry().descriptor_at(0);
}

/// Every key at its schema default, `root` set (FakeConfig is neither copyable nor movable).
inline void configure(const PluginLibrary& lib, FakeConfig& cfg, const std::filesystem::path& root) {
  tp::test::fill_defaults(descriptor(lib), cfg);
  cfg.values["root"] = root.string();
}

/// The image field as float [3][h][w] (reads through strides, so channels_last works too).
inline std::vector<float> chw(const Sample& s, int* h, int* w) {
  const DLTensor& t = s.tensor("image");
  REQUIRE(t.ndim == 3);
  REQUIRE(t.dtype.code == kDLFloat);
  REQUIRE(t.shape[0] == 3);
  *h = static_cast<int>(t.shape[1]);
  *w = static_cast<int>(t.shape[2]);
  const int64_t s0 = t.strides ? t.strides[0] : t.shape[1] * t.shape[2];
  const int64_t s1 = t.strides ? t.strides[1] : t.shape[2];
  const int64_t s2 = t.strides ? t.strides[2] : 1;
  const auto* p = reinterpret_cast<const float*>(static_cast<const char*>(t.data) + t.byte_offset);
  std::vector<float> out(static_cast<size_t>(3 * *h * *w));
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < *h; ++y)
      for (int x = 0; x < *w; ++x) out[(c * *h + y) * *w + x] = p[c * s0 + y * s1 + x * s2];
  return out;
}

/// An 8-bit BGR image as the plugin's output would be with mean 0, std 1: CHW RGB in [0, 1].
inline std::vector<float> expected_chw(const cv::Mat& bgr) {
  std::vector<float> out(static_cast<size_t>(3 * bgr.rows * bgr.cols));
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < bgr.rows; ++y)
      for (int x = 0; x < bgr.cols; ++x)
        out[(c * bgr.rows + y) * bgr.cols + x] = bgr.at<cv::Vec3b>(y, x)[2 - c] / 255.0f;
  return out;
}

inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

inline int64_t label_of(const Sample& s) { return s.values<int64_t>("label")[0]; }

/// get_sample with ctx->encoded_images = 1 (plugin ABI 1.11): the encoded form of "image".
inline Sample encoded_sample(const Dataset& ds, uint64_t index, uint64_t seed) {
  tp_worker_ctx_t ctx = tp::test::worker_ctx(seed);
  ctx.encoded_images = 1;
  Sample s;
  REQUIRE(ds.try_get(index, &ctx, s) == TP_OK);
  return s;
}

/// The int32 [7] field "image_box" of an encoded sample.
inline std::array<int32_t, 7> box_of(const Sample& s) {
  const DLTensor& t = s.tensor("image_box");
  REQUIRE(t.dtype.code == kDLInt);
  REQUIRE(t.dtype.bits == 32);
  REQUIRE(s.shape("image_box") == std::vector<int64_t>{7});
  std::array<int32_t, 7> box{};
  const auto values = s.values<int32_t>("image_box");
  std::copy(values.begin(), values.end(), box.begin());
  return box;
}

/// The uint8 [N] field "image" of an encoded sample: the file's bytes.
inline std::vector<unsigned char> bytes_of(const Sample& s) {
  const DLTensor& t = s.tensor("image");
  REQUIRE(t.dtype.code == kDLUInt);
  REQUIRE(t.dtype.bits == 8);
  REQUIRE(t.ndim == 1);
  const auto values = s.values<uint8_t>("image");
  return {values.begin(), values.end()};
}

}  // namespace tp::test::image_folder
