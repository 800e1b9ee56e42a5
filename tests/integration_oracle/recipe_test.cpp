// configs/recipe_resnet.toml end to end: ResNet-18 on an image folder written here, with
// RandAugment, random erasing, Mixup/CutMix, label smoothing, warmup + cosine and an EMA the best
// checkpoint is chosen by; then a run resumed from a mid-epoch checkpoint of it ends with weights,
// EMA and optimizer bitwise equal to the straight run's.
#include <ATen/ATen.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "tp/framework/checkpoint/checkpoint.h"

#include "integration/history_reader.h"
#include "integration/host_runner.h"

#include <doctest/doctest.h>

namespace {

/// <dir>/<split>/<class>/NN.png: three classes (a disc, a square, a bar on a tinted ground).
std::filesystem::path write_split(const std::filesystem::path& dir, const std::string& split, int count) {
  const auto root = dir / split;
  const char* classes[] = {"disc", "square", "bar"};
  for (int c = 0; c < 3; ++c) {
    std::filesystem::create_directories(root / classes[c]);
    for (int i = 0; i < count; ++i) {
      cv::Mat img(40, 48, CV_8UC3, cv::Scalar(30 + 7 * i, 60 + 5 * c, 90));
      const cv::Scalar ink(255 - 9 * i, 120 + 40 * c, 30 * c);
      if (c == 0) cv::circle(img, cv::Point(14 + i, 20), 9, ink, -1);
      if (c == 1) cv::rectangle(img, cv::Rect(8 + i, 10, 16, 16), ink, -1);
      if (c == 2) cv::rectangle(img, cv::Rect(4, 16 + i / 2, 40, 6), ink, -1);
      char name[16];
      std::snprintf(name, sizeof name, "%02d.png", i);
      REQUIRE(cv::imwrite((root / classes[c] / name).string(), img));
    }
  }
  return root;
}

std::string recipe_args(const std::filesystem::path& data, const std::filesystem::path& out) {
  return "--config configs/recipe_resnet.toml --output-dir '" + out.string() + "' --set run.device=\"cpu\" "
         "--set run.threads=1 --set 'data.train.root=\"" + (data / "train").string() + "\"' "
         "--set 'data.train.val_root=\"" + (data / "val").string() + "\"' "
         "--set 'data.train.random_resized_crop=[32]' --set 'data.train.resize=[36]' "
         "--set 'data.train.center_crop=[32]' --set data.num_workers=2 --set train.epochs=2 "
         "--set train.batch_size=8 --set train.log_every_steps=1 --set schedule.warmup_steps=2 "
         "--set model.num_classes=3 --set 'data.batch_transforms[0].num_classes=3' "
         "--set checkpoint.strategy=\"steps\" --set checkpoint.every=3 --set checkpoint.keep_last=10 "
         "--set progress.mode=\"off\" --set plots.enabled=false ";
}

}  // namespace

TEST_CASE("configs/recipe_resnet.toml trains end to end; a mid-epoch resume of it is bitwise exact") {
  const auto data = tp::test::fresh_dir("recipe_data");
  write_split(data, "train", 16); // 48 images: 6 steps of 8 per epoch
  write_split(data, "val", 4);

  const auto straight_dir = tp::test::fresh_dir("recipe_straight");
  const auto straight = tp::test::run_host(recipe_args(data, straight_dir));
  INFO(straight.output);
  REQUIRE(straight.exit_code == 0);
  CHECK(straight.output.find("ema: decay") != std::string::npos);
  const auto rows = tp::test::read_history(straight_dir);
  const auto epochs = tp::test::rows_of(rows, "epoch");
  REQUIRE(epochs.size() == 2);
  CHECK(epochs.back().has("val_ema/accuracy"));
  CHECK(std::isfinite(epochs.back().values.at("train/loss")));
  const auto steps = tp::test::rows_of(rows, "step");
  REQUIRE(steps.size() == 12);
  CHECK(steps[0].values.at("lr") < steps[1].values.at("lr")); // warmup
  CHECK(steps[11].values.at("lr") < steps[2].values.at("lr")); // cosine decay
  const auto best = tp::load_checkpoint(straight_dir / "checkpoints" / "best.pt");
  CHECK(best.monitor == "val_ema/accuracy");

  // Resume from step 9 (epoch 2, batch 3) in a fresh directory: the rest of the run is the same.
  const auto resumed_dir = tp::test::fresh_dir("recipe_resumed");
  const auto resumed = tp::test::run_host(recipe_args(data, resumed_dir) + "--resume '" +
                                          (straight_dir / "checkpoints" / "step-00000009.pt").string() + "'");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.output.find("resumed at epoch 2, batch 3, step 9") != std::string::npos);
  const auto a = tp::load_checkpoint(straight_dir / "checkpoints" / "last.pt");
  const auto b = tp::load_checkpoint(resumed_dir / "checkpoints" / "last.pt");
  CHECK(a.step == 12);
  CHECK(b.step == 12);
  REQUIRE(a.model.size() == b.model.size());
  for (std::size_t i = 0; i < a.model.size(); ++i) {
    INFO(a.model[i].first);
    CHECK(at::equal(a.model[i].second, b.model[i].second));
  }
  REQUIRE(a.average("ema") != nullptr);
  REQUIRE(b.average("ema") != nullptr);
  const auto& ea = a.average("ema")->weights;
  const auto& eb = b.average("ema")->weights;
  REQUIRE(ea.size() == eb.size());
  for (std::size_t i = 0; i < ea.size(); ++i) {
    INFO(ea[i].first);
    CHECK(at::equal(ea[i].second, eb[i].second));
  }
  // The optimizer state shows in the weights it produced; its archive's bytes are not compared
  // (LibTorch's archive is a zip whose record layout may differ between writers).
  CHECK(a.scheduler_state == b.scheduler_state);
}
