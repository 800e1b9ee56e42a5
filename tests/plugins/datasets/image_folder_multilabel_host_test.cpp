// Multi-label classification end to end: an image_folder csv whose rows list any number of labels
// (multi_label = true), small_cnn trained with org.torchhost.bce_with_logits and scored with
// org.torchhost.multilabel, then host predict's per-label sigmoid columns.
#include <filesystem>
#include <fstream>
#include <string>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <doctest/doctest.h>

#include "integration/host_runner.h"

namespace {

/// <dir>/img/<split>_<i>.png and <dir>/img/<split>.csv: noise, with a red disc when i is odd
/// (label "red") and a blue square when bit 1 of i is set ("blue"): all four label sets.
void write_label_sets(const std::filesystem::path& dir, const std::string& split, int count) {
  std::filesystem::create_directories(dir / "img");
  std::ofstream csv(dir / "img" / (split + ".csv"));
  csv << "path,labels\n";
  cv::RNG rng(static_cast<uint64_t>(count));
  for (int i = 0; i < count; ++i) {
    cv::Mat img(32, 32, CV_8UC3);
    rng.fill(img, cv::RNG::UNIFORM, 0, 60);
    const bool red = i % 2 == 1, blue = (i / 2) % 2 == 1;
    if (red) cv::circle(img, cv::Point(10 + i % 7, 12), 6, cv::Scalar(0, 0, 255), -1);
    if (blue) cv::rectangle(img, cv::Rect(16, 16 + i % 5, 10, 10), cv::Scalar(255, 0, 0), -1);
    const std::string name = split + "_" + std::to_string(i) + ".png";
    REQUIRE(cv::imwrite((dir / "img" / name).string(), img));
    csv << name << "," << (red ? "red" : "") << (red && blue ? ";" : "") << (blue ? "blue" : "") << "\n";
  }
}

}  // namespace

TEST_CASE("multi-label end to end: a csv of label sets, bce_with_logits, multilabel's map, predict's sigmoids") {
  const auto dir = tp::test::fresh_dir("image_folder_multilabel_host");
  write_label_sets(dir, "train", 48);
  write_label_sets(dir, "val", 16);
  const auto cfg = dir / "run.toml";
  std::ofstream(cfg) << "[run]\nseed = 1\ndevice = \"cpu\"\nthreads = 1\n[train]\nepochs = 5\nbatch_size = 8\n"
                        "[optim]\nlr = 3e-3\n[data]\nnum_workers = 1\n"
                        "[data.train]\ncomponent = \"org.torchhost.image_folder\"\nroot = \"img\"\ncsv = \"img/train.csv\"\n"
                        "val_csv = \"img/val.csv\"\nmulti_label = true\nresize = [32, 32]\n"
                        "[model]\ncomponent = \"org.torchhost.small_cnn\"\nnum_classes = 2\nimage_size = 32\n"
                        "[loss]\ncomponent = \"org.torchhost.bce_with_logits\"\n"
                        "[[metrics]]\ncomponent = \"org.torchhost.multilabel\"\nnum_labels = 2\n"
                        "[checkpoint]\nmonitor = \"val/map\"\n";
  const auto out = dir / "out";
  const auto run = tp::test::run_host("train --config '" + cfg.string() + "' --output-dir '" + out.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  // The two labels are each a colour the network sees at once: learnt within five epochs.
  CHECK(run.output.find("val/map=1") != std::string::npos);
  CHECK(run.output.find("val/label_f1=") != std::string::npos);
  const auto predicted = out / "p.csv";
  const auto predict = tp::test::run_host("predict --config '" + (out / "config.toml").string() + "' --checkpoint last --output '" +
                                          predicted.string() + "'");
  INFO(predict.output);
  REQUIRE(predict.exit_code == 0);
  std::ifstream rows(predicted);
  std::string header, first;
  REQUIRE(std::getline(rows, header));
  REQUIRE(std::getline(rows, first));
  CHECK(header == "index,path,logits.0,logits.1,logits.argmax,logits.class,logits.prob,logits.sigmoid.0,logits.sigmoid.1,"
                  "logits.predicted.0,logits.predicted.1");
  CHECK(first.ends_with(",0,0"));  // val_0.png: neither a disc nor a square
  // The export says the scores are sigmoids (the inference library reads them so).
  const auto exported = dir / "model.safetensors";
  const auto export_run = tp::test::run_host("export --checkpoint '" + (out / "checkpoints" / "last.pt").string() +
                                             "' --format safetensors --output '" + exported.string() + "'");
  INFO(export_run.output);
  REQUIRE(export_run.exit_code == 0);
  const std::string bytes = tp::test::read_text(exported);
  CHECK(bytes.find("\"torchhost.scores\":\"\\\"sigmoid\\\"\"") != std::string::npos);
  CHECK(bytes.find("label scores before the sigmoid") != std::string::npos);
  // A shard sample carries one class: host shards write refuses rather than drop labels.
  const auto shards = tp::test::run_host("shards write --config '" + cfg.string() + "' --out '" + (dir / "shards").string() + "'");
  INFO(shards.output);
  CHECK(shards.exit_code == 2);
  CHECK(shards.output.find("data.train has multi_label = true, and a shard sample carries one class") != std::string::npos);
}
