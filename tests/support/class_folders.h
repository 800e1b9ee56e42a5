// A tiny image_folder data set for host tests: two classes of small PNGs that a model tells apart.
#pragma once

#include <filesystem>
#include <string>

#include <doctest/doctest.h>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

namespace tp::test {

/// <root>/{dark,light}/<i>.png, `count` 32x32 images per class, each its own colour (so each
/// file's outputs differ).
inline void write_dark_light_folders(const std::filesystem::path& root, int count) {
  for (int c = 0; c < 2; ++c) {
    const std::filesystem::path dir = root / (c == 0 ? "dark" : "light");
    std::filesystem::create_directories(dir);
    for (int i = 0; i < count; ++i) {
      const cv::Mat img(32, 32, CV_8UC3, cv::Scalar(c == 0 ? 30 + 9 * i : 200 + 9 * i, 90, 60 + 40 * i));
      REQUIRE(cv::imwrite((dir / (std::to_string(i) + ".png")).string(), img));
    }
  }
}

}  // namespace tp::test
