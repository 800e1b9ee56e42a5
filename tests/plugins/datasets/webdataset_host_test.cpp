// End to end with the real host: an image folder written here becomes WebDataset shards through
// `host shards write`, and org.torchhost.webdataset trains small_cnn on them as well as
// image_folder does on the folder; evaluation on 2 ranks equals 1 process; a run stopped by
// SIGTERM mid-epoch resumes to the same weights (compared as exported safetensors, byte for
// byte); `host predict` writes one row per sample in key order; configs/webdataset_resnet.toml
// trains on them scaled down.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <doctest/doctest.h>

#include "integration/host_runner.h"

namespace {

namespace fs = std::filesystem;
using tp::test::contains;
using tp::test::run_host;

constexpr int kClasses = 4;

/// <dir>/<split>/c<k>/NN.png: `count` 32x32 images per class, each class a colour and a position
/// of its square, with per-image noise in brightness.
fs::path write_split(const fs::path& dir, const std::string& split, int count) {
  const fs::path root = dir / split;
  for (int c = 0; c < kClasses; ++c) {
    const fs::path folder = root / ("c" + std::to_string(c));
    fs::create_directories(folder);
    for (int i = 0; i < count; ++i) {
      cv::Mat img(32, 32, CV_8UC3, cv::Scalar::all(60 + (i * 37) % 50));
      const cv::Scalar colour(c == 0 ? 230 : 30, c == 1 ? 230 : 30, c == 2 ? 230 : 30 + 100 * (c == 3));
      const int x = 4 + 12 * (c % 2), y = 4 + 12 * (c / 2);
      cv::rectangle(img, cv::Rect(x + i % 3, y + (i / 3) % 3, 12, 12), colour, -1);
      char name[16];
      std::snprintf(name, sizeof name, "%02d.png", i);
      REQUIRE(cv::imwrite((folder / name).string(), img));
    }
  }
  return root;
}

const std::string kCommon =
    "[run]\nname = \"wds\"\nseed = 3\ndevice = \"cpu\"\nthreads = 1\n"
    "[train]\nepochs = 2\nbatch_size = 8\nlog_every_steps = 2\n"
    "[optim]\nlr = 0.003\n"
    "[data]\nnum_workers = 2\nprefetch = 2\ngroup_window = 2\n"
    "[progress]\nmode = \"off\"\n"
    "[model]\ncomponent = \"org.torchhost.small_cnn\"\nnum_classes = 4\nimage_size = 32\n"
    "[loss]\ncomponent = \"org.torchhost.cross_entropy\"\n"
    "[[metrics]]\ncomponent = \"org.torchhost.accuracy\"\n";
const std::string kTransforms = "mean = [0.5, 0.5, 0.5]\nstd = [0.25, 0.25, 0.25]\n";

std::string folder_config(const fs::path& train, const fs::path& val) {
  return kCommon + "[data.train]\ncomponent = \"org.torchhost.image_folder\"\nroot = \"" + train.string() +
         "\"\nval_root = \"" + val.string() + "\"\n" + kTransforms;
}

std::string shards_config(const std::string& train_pattern, const std::string& val_pattern, const fs::path& cache) {
  return kCommon + "[data.train]\ncomponent = \"org.torchhost.webdataset\"\nshards = \"" + train_pattern +
         "\"\nval_shards = \"" + val_pattern + "\"\ncache_dir = \"" + cache.string() + "\"\n" + kTransforms;
}

/// The pattern `host shards write` printed (`shards = "..."`).
std::string printed_pattern(const std::string& output) {
  std::smatch match;
  REQUIRE(std::regex_search(output, match, std::regex("shards = \"([^\"]+)\"")));
  return match[1];
}

/// The last value of `name` in a run's history.jsonl ("val/accuracy":0.975 -> 0.975).
double last_value(const fs::path& run_dir, const std::string& name) {
  const std::string text = tp::test::read_text(run_dir / "history.jsonl");
  const std::size_t at = text.rfind("\"" + name + "\":");
  REQUIRE(at != std::string::npos);
  return std::stod(text.substr(at + name.size() + 3));
}

}  // namespace

TEST_CASE("shards written from an image folder train, evaluate on 2 ranks, resume and predict as the folder does") {
  const fs::path dir = tp::test::fresh_dir("webdataset_host");
  const fs::path train = write_split(dir, "train", 30);
  const fs::path val = write_split(dir, "val", 10);
  const fs::path folder_toml = dir / "folder.toml";
  std::ofstream(folder_toml) << folder_config(train, val);

  // 1. host shards write: both splits, several shards each (120 PNGs of ~0.4 KB in 16 KB shards).
  const fs::path shards = dir / "shards";
  const auto written_train = run_host("shards write --config '" + folder_toml.string() + "' --out '" +
                                      shards.string() + "' --shard-size 16KB");
  INFO(written_train.output);
  REQUIRE(written_train.exit_code == 0);
  // The val split in the listing's order (--keep-order), so that step 5 can check its labels by
  // position; the train split shuffled across its shards (the default).
  const auto written_val = run_host("shards write --config '" + folder_toml.string() + "' --split val --out '" +
                                    shards.string() + "' --shard-size 16KB --keep-order");
  INFO(written_val.output);
  REQUIRE(written_val.exit_code == 0);
  const std::string train_pattern = printed_pattern(written_train.output);
  const std::string val_pattern = printed_pattern(written_val.output);
  CHECK(contains(train_pattern, "train-{000000.."));
  CHECK(contains(val_pattern, "val-"));
  std::size_t shard_files = 0;
  for (const auto& entry : fs::directory_iterator(shards)) shard_files += entry.path().extension() == ".tar";
  CHECK(shard_files >= 6);
  // A second write into the same names is refused and leaves the shards as they were.
  const std::string first_shard = tp::test::read_text(shards / "train-000000.tar");
  const auto again = run_host("shards write --config '" + folder_toml.string() + "' --out '" + shards.string() + "'");
  CHECK(again.exit_code == 2);
  CHECK(contains(again.output, "already holds shards named 'train-*.tar'"));
  CHECK(tp::test::read_text(shards / "train-000000.tar") == first_shard);
  // Under a launcher every rank would write the same shards: refused, nothing written.
  const auto launched = run_host("--nproc-per-node 2 shards write --config '" + folder_toml.string() + "' --out '" +
                                 (dir / "launched").string() + "'");
  CHECK(launched.exit_code == 2);
  CHECK(contains(launched.output, "host shards write runs as one process"));
  CHECK_FALSE(fs::exists(dir / "launched"));

  // 2. The same model trains on the folder and on the shards to the same accuracy.
  const fs::path shards_toml = dir / "shards.toml";
  std::ofstream(shards_toml) << shards_config(train_pattern, val_pattern, dir / "index-cache");
  const fs::path folder_run = dir / "folder_run", shards_run = dir / "shards_run";
  const auto on_folder = run_host("--config '" + folder_toml.string() + "' --output-dir '" + folder_run.string() + "'");
  INFO(on_folder.output);
  REQUIRE(on_folder.exit_code == 0);
  const auto on_shards = run_host("--config '" + shards_toml.string() + "' --output-dir '" + shards_run.string() + "'");
  INFO(on_shards.output);
  REQUIRE(on_shards.exit_code == 0);
  const double folder_accuracy = last_value(folder_run, "val/accuracy");
  const double shards_accuracy = last_value(shards_run, "val/accuracy");
  CHECK(folder_accuracy >= 0.95);
  CHECK(shards_accuracy >= 0.95);
  CHECK(contains(on_shards.output, "training order: 120 samples in "));
  CHECK(contains(on_shards.output, "within windows of 2 groups (data.group_window)"));

  // 3. Evaluation on 2 ranks equals 1 process (every sample once, in contiguous runs of shards).
  const std::string eval_args = "eval --config '" + shards_toml.string() + "' --output-dir '" + shards_run.string() +
                                "' --checkpoint last";
  const auto one = run_host(eval_args);
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
  CHECK_FALSE(contains(one.output, "training order"));  // evaluation reads no training order (issue 58)
  const std::string one_json = tp::test::read_text(shards_run / "eval_last.json");
  const auto two = run_host("--nproc-per-node 2 " + eval_args);
  INFO(two.output);
  REQUIRE(two.exit_code == 0);
  const std::string two_json = tp::test::read_text(shards_run / "eval_last.json");
  std::smatch a, b;
  REQUIRE(std::regex_search(one_json, a, std::regex("\"val/accuracy\": *([0-9.e+-]+)")));
  REQUIRE(std::regex_search(two_json, b, std::regex("\"val/accuracy\": *([0-9.e+-]+)")));
  CHECK(std::stod(a[1]) == std::stod(b[1]));
  CHECK(std::stod(a[1]) == doctest::Approx(shards_accuracy));
  // The loss sums over every sample once, whichever rank reads it: equal up to summation order.
  REQUIRE(std::regex_search(one_json, a, std::regex("\"val/loss\": *([0-9.e+-]+)")));
  REQUIRE(std::regex_search(two_json, b, std::regex("\"val/loss\": *([0-9.e+-]+)")));
  CHECK(std::stod(a[1]) == doctest::Approx(std::stod(b[1])).epsilon(1e-6));

  // 4. Resume: SIGTERM mid-epoch, --resume auto; the weights equal the uninterrupted run's.
  const fs::path stopped = dir / "stopped_run";
  const auto interrupted = tp::test::run_host_until_history(
      "--config '" + shards_toml.string() + "' --output-dir '" + stopped.string() + "' --set train.epochs=2",
      stopped / "history.jsonl", 5);
  INFO(interrupted.output);
  CHECK(contains(interrupted.output, "exit=143"));
  const auto resumed = run_host("--config '" + shards_toml.string() + "' --output-dir '" + stopped.string() +
                                "' --resume auto");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(contains(resumed.output, "resumed at epoch"));
  for (const fs::path& run : {shards_run, stopped}) {
    const auto exported = run_host("export --checkpoint '" + (run / "checkpoints/last.pt").string() +
                                   "' --format safetensors --output '" + (run / "weights.safetensors").string() + "'");
    INFO(exported.output);
    REQUIRE(exported.exit_code == 0);
  }
  CHECK(tp::test::read_text(shards_run / "weights.safetensors") == tp::test::read_text(stopped / "weights.safetensors"));

  // 5. host predict on the sharded val split: one row per sample, in key (= index) order, each
  //    with the label its shard holds (the folder's class, in the folder's order).
  const fs::path rows = dir / "val_predictions.csv";
  const auto predicted = run_host("predict --config '" + shards_toml.string() + "' --output-dir '" +
                                  shards_run.string() + "' --checkpoint last --output '" + rows.string() + "'");
  INFO(predicted.output);
  REQUIRE(predicted.exit_code == 0);
  std::ifstream csv(rows);
  std::string line;
  std::getline(csv, line);  // the header
  int row = 0;
  for (; std::getline(csv, line); ++row) {
    CAPTURE(line);
    CHECK(line.rfind(std::to_string(row) + ",", 0) == 0);  // the index column, in order
    // The path column (plugin ABI 1.13): the file the sample was written from, its json member's
    // source joined to the folder the description records (data trial F5: it was `<shard>:<key>`).
    const std::size_t path_at = line.find(',') + 1;
    const std::string path = line.substr(path_at, line.find(',', path_at) - path_at);
    char file[24];
    std::snprintf(file, sizeof file, "c%d/%02d.png", row / 10, row % 10);
    CHECK(path == (val / file).string());
    CHECK(line.ends_with("," + std::to_string(row / 10)));  // the label: 10 images per class folder
  }
  CHECK(row == kClasses * 10);

  // 6. configs/webdataset_resnet.toml as its header says to run it, on these shards, scaled down.
  const fs::path recipe_run = dir / "recipe_run";
  const auto recipe = run_host(
      "--config configs/webdataset_resnet.toml --output-dir '" + recipe_run.string() + "' --set data.train.shards='\"" +
      train_pattern + "\"' --set data.train.val_shards='\"" + val_pattern + "\"' --set data.train.cache_dir='\"" +
      (dir / "index-cache").string() + "\"' --set model.depth=18 --set model.num_classes=4 "
      "--set data.train.random_resized_crop=[32] --set data.train.resize=[36] --set data.train.center_crop=[32] "
      "--set train.epochs=1 --set train.batch_size=8 --set data.num_workers=1 --set run.device='\"cpu\"' "
      "--set schedule.warmup_steps=2 --set progress.mode='\"off\"'");
  INFO(recipe.output);
  CHECK(recipe.exit_code == 0);
  CHECK(contains(recipe.output, "within windows of 8 groups (data.group_window)"));
  CHECK(fs::exists(recipe_run / "checkpoints" / "best.pt"));
}
