// End to end: coco_detection's contiguous labels through `host`. With contiguous_labels each
// split ranks the categories of its own annotation file, and lends them as class names; a val file
// listing one category fewer than the training file put every later label on another class (and
// the mAP on the wrong ones) without a word. The host now refuses splits whose class names differ
// (run_components.cpp, check_split_classes) before any model is built.
#include <filesystem>
#include <fstream>
#include <string>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <doctest/doctest.h>

#include "integration/host_runner.h"

namespace {

namespace fs = std::filesystem;

// <dir>/images/{1,2}.png (48x40 and 40x56: a batch of both pads one of them) and an instances
// file naming `categories` (a JSON array's items).
fs::path write_split(const fs::path& dir, const std::string& name, const std::string& categories) {
  fs::create_directories(dir / "images");
  REQUIRE(cv::imwrite((dir / "images" / "1.png").string(), cv::Mat(40, 48, CV_8UC3, cv::Scalar::all(60))));
  REQUIRE(cv::imwrite((dir / "images" / "2.png").string(), cv::Mat(56, 40, CV_8UC3, cv::Scalar::all(120))));
  const fs::path json = dir / (name + ".json");
  std::ofstream(json) << R"({"images": [{"id": 1, "file_name": "1.png", "width": 48, "height": 40},
                                        {"id": 2, "file_name": "2.png", "width": 40, "height": 56}],
                            "annotations": [{"id": 1, "image_id": 1, "category_id": 3, "bbox": [4, 4, 20, 16], "area": 320, "iscrowd": 0},
                                            {"id": 2, "image_id": 2, "category_id": 7, "bbox": [10, 8, 24, 20], "area": 480, "iscrowd": 0}],
                            "categories": [)" << categories << "]}";
  return json;
}

// coco_map as the COCO recipe used to name its keys: the ground truth in the files' pixels, which
// coco_detection gives on the val split only.
const std::string kGroundTruthMetric =
    "[[metrics]]\ncomponent = \"org.torchhost.coco_map\"\nnum_classes = 3\ntarget_boxes = \"gt_boxes\"\n"
    "target_labels = \"gt_labels\"\niscrowd = \"gt_iscrowd\"\nareas = \"gt_areas\"\n";

std::string run_config(const fs::path& train, const fs::path& val) {
  return "[run]\nseed = 1\ndevice = \"cpu\"\n[train]\nepochs = 1\nbatch_size = 2\n[data]\nnum_workers = 1\n"
         "[data.train]\ncomponent = \"org.torchhost.coco_detection\"\nimages = \"" + (train.parent_path() / "images").string() +
         "\"\nannotations = \"" + train.string() + "\"\nval_images = \"" + (val.parent_path() / "images").string() +
         "\"\nval_annotations = \"" + val.string() + "\"\nmin_size = [32]\nmax_size = 64\ncontiguous_labels = true\n"
         "[model]\ncomponent = \"org.torchhost.fcos\"\nbackbone = \"resnet18\"\nnum_classes = 3\nfpn_channels = 32\n"
         "head_convs = 1\n[loss]\ncomponent = \"org.torchhost.fcos_loss\"\n";
}

}  // namespace

TEST_CASE("coco_detection: a val file whose categories differ from training's is refused, naming the first label apart") {
  const fs::path dir = tp::test::fresh_dir("coco_split_classes");
  const std::string three = R"({"id": 3, "name": "cat"}, {"id": 5, "name": "dog"}, {"id": 7, "name": "bird"})";
  const fs::path train = write_split(dir / "train", "instances_train", three);
  // The same file lists the dog (no dog is annotated in val): labels 0, 1, 2 in both.
  const fs::path same = write_split(dir / "same", "instances_val", three);
  // A converter that lists only the categories it saw: bird becomes label 1, dog's label in training.
  const fs::path fewer = write_split(dir / "fewer", "instances_val",
                                     R"({"id": 3, "name": "cat"}, {"id": 7, "name": "bird"})");
  std::ofstream(dir / "same.toml") << run_config(train, same);
  std::ofstream(dir / "fewer.toml") << run_config(train, fewer);
  const auto refused = tp::test::run_host("train --config '" + (dir / "fewer.toml").string() + "' --output-dir '" +
                                          (dir / "fewer_run").string() + "'");
  INFO(refused.output);
  CHECK(refused.exit_code == 2);
  CHECK(refused.output.find("[data.train] ('org.torchhost.coco_detection') names 2 classes (cat, bird) for its val split "
                            "and 3 (cat, dog, bird) for training") != std::string::npos);
  CHECK(refused.output.find("label 1 is 'dog' in training and 'bird' here") != std::string::npos);
  CHECK(refused.output.find("the same `categories` in both annotation files") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "fewer_run" / "checkpoints"));
  // The same categories: the run trains (one step) and evaluates.
  const auto trained = tp::test::run_host("train --config '" + (dir / "same.toml").string() + "' --output-dir '" +
                                          (dir / "same_run").string() + "'");
  INFO(trained.output);
  CHECK(trained.exit_code == 0);
  // host eval and host predict build no training split: the checkpoint's class names stand for it.
  for (const std::string command : {"eval", "predict"}) {
    const auto later = tp::test::run_host(command + " --config '" + (dir / "same.toml").string() + "' --output-dir '" +
                                          (dir / "same_run").string() + "' --checkpoint last --set " +
                                          "data.train.val_annotations='\"" + fewer.string() + "\"'");
    INFO(later.output);
    CHECK(later.exit_code == 2);
    CHECK(later.output.find("names 2 classes (cat, bird) and the checkpoint's training data named 3 (cat, dog, bird)") !=
          std::string::npos);
  }
}

// A trial's `host verify` on the COCO recipe failed three checks its training passes: the metric
// check ran coco_map on a training batch (no gt_*), the overfit run evaluated training batches
// (the same), and accumulation judged micro-batches that pad to their own largest image.
TEST_CASE("coco_detection: host verify runs the metrics on a val batch and says why accumulation differs") {
  const fs::path dir = tp::test::fresh_dir("coco_verify");
  const std::string three = R"({"id": 3, "name": "cat"}, {"id": 5, "name": "dog"}, {"id": 7, "name": "bird"})";
  const fs::path train = write_split(dir / "train", "instances_train", three);
  const fs::path val = write_split(dir / "val", "instances_val", three);
  std::ofstream(dir / "run.toml") << run_config(train, val) << kGroundTruthMetric;
  const auto verified = tp::test::run_host("verify --config '" + (dir / "run.toml").string() +
                                           "' --checks metric,accumulation --output-dir '" + (dir / "run").string() + "'");
  INFO(verified.output);
  CHECK(verified.exit_code == 0);
  CHECK(verified.output.find("metric        PASS") != std::string::npos);
  CHECK(verified.output.find("accumulation  SKIP") != std::string::npos);
  CHECK(verified.output.find("by design: [data.train] pads image to each batch's largest sample") != std::string::npos);
  // overfit_batches evaluates on training batches; with eval.strategy = "no" it evaluates nothing
  // (the sanity check ran before and failed on the missing gt_boxes).
  const auto overfit = tp::test::run_host("train --config '" + (dir / "run.toml").string() + "' --output-dir '" +
                                          (dir / "overfit").string() + "' --set train.overfit_batches=1 "
                                          "--set train.max_steps=2 --set 'eval.strategy=\"no\"'");
  INFO(overfit.output);
  CHECK(overfit.exit_code == 0);
  CHECK(overfit.output.find("sanity check") == std::string::npos);
}
