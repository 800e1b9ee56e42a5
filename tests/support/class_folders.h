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

/// run.toml's text for a CPU run of small_cnn (2 classes at 32x32, cross entropy) on the folders
/// write_dark_light_folders made under `train` and `val`, named `name`, training batches of
/// `batch_size`; `eval_batch_size` > 0 adds an [eval] table with it.
inline std::string dark_light_run_config(const std::string& name, const std::filesystem::path& train,
                                         const std::filesystem::path& val, int batch_size, int eval_batch_size = 0) {
  std::string eval;
  if (eval_batch_size > 0) eval = "[eval]\nbatch_size = " + std::to_string(eval_batch_size) + "\n";
  return "[run]\nname = \"" + name + "\"\nseed = 1\ndevice = \"cpu\"\n"
         "[train]\nepochs = 1\nbatch_size = " + std::to_string(batch_size) + "\n" + eval +
         "[data]\nnum_workers = 1\n"
         "[data.train]\ncomponent = \"org.torchhost.image_folder\"\nroot = \"" + train.string() +
         "\"\nval_root = \"" + val.string() +
         "\"\nresize = [32, 32]\nmean = [0.5, 0.5, 0.5]\nstd = [0.25, 0.25, 0.25]\n"
         "[model]\ncomponent = \"org.torchhost.small_cnn\"\nnum_classes = 2\nimage_size = 32\n"
         "[loss]\ncomponent = \"org.torchhost.cross_entropy\"\n";
}

}  // namespace tp::test
