// Every bad file of an image folder named in one run (data trial F2: a share with 4 bad files took
// 5 runs of `host shards write`, each stopping at the next file, and `host plugins check
// --samples all` named one of the 4). `shards write` under data.on_bad_sample = "fail" stops at
// the first, saying how to list them all and how to skip them; under "skip" it writes the rest and
// lists each file left out, with its reason, on stdout and in the shards' description; `plugins
// check --samples all` reads on past each bad sample and lists them all, then their count. The
// images are real 8x8 PNGs (plugins check decodes them); each run takes well under a second.
#include <filesystem>
#include <fstream>
#include <string>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <doctest/doctest.h>

#include "fixtures.h"
#include "integration/host_runner.h"

namespace {

namespace fs = std::filesystem;
using tp::test::contains;

/// The files of the folder that no image dataset can read, each for another reason.
constexpr const char* kBadFiles[] = {"c1/empty.jpg", "c1/page.jpg", "c0/cut.jpg"};

/// `<root>/c0` and `<root>/c1` with four good 8x8 PNGs each, plus kBadFiles: an empty file, a
/// web page under an image's name and a JPEG cut before its end.
void write_bad_folder(const fs::path& root) {
  for (const char* cls : {"c0", "c1"}) {
    fs::create_directories(root / cls);
    for (int i = 0; i < 4; ++i)
      REQUIRE(cv::imwrite((root / cls / ("good_" + std::to_string(i) + ".png")).string(),
                          cv::Mat(8, 8, CV_8UC3, cv::Scalar(10 * i, 60, 200))));
  }
  std::ofstream(root / "c1" / "empty.jpg");
  std::ofstream(root / "c1" / "page.jpg") << "<html>\n<title>404 Not Found</title>\n</html>\n";
  std::ofstream(root / "c0" / "cut.jpg", std::ios::binary) << std::string("\xFF\xD8\xFF\xE0\0\x10JFIF", 10);
}

/// A run config over `root` (the [model] and [loss] plugins check's --config loads, unused here),
/// with `extra` lines in [data.train].
fs::path bad_folder_config(const fs::path& dir, const fs::path& root, const std::string& name,
                           const std::string& extra = "") {
  const fs::path config = dir / name;
  std::ofstream(config) << "[data.train]\ncomponent = \"org.torchhost.image_folder\"\nroot = \"" << root.string()
                        << "\"\nresize = [8]\n" << extra
                        << "[model]\ncomponent = \"org.torchhost.small_cnn\"\n"
                           "[loss]\ncomponent = \"org.torchhost.cross_entropy\"\n";
  return config;
}

int files_named(const std::string& text) {
  int named = 0;
  for (const char* file : kBadFiles) named += contains(text, file) ? 1 : 0;
  return named;
}

}  // namespace

TEST_CASE("host shards write: 'fail' stops at a bad file saying how to list and skip them; 'skip' lists every one") {
  const fs::path dir = tp::test::fresh_dir("shards_bad_files");
  const fs::path root = dir / "images";
  write_bad_folder(root);
  const std::string config = bad_folder_config(dir, root, "data.toml").string();

  // "fail", the default: the first bad file in the written order, with the two ways on.
  const tp::test::HostRun failed =
      tp::test::run_host("shards write --config '" + config + "' --out '" + (dir / "failed").string() + "'");
  INFO(failed.output);
  CHECK(failed.exit_code == 1);
  CHECK(files_named(failed.output) == 1);
  CHECK(contains(failed.output, "To list every bad file in one pass: host plugins check '"));
  CHECK(contains(failed.output, "image_folder.so' --config '" + config + "' --samples all"));
  CHECK(contains(failed.output, "--set data.on_bad_sample='\"skip\"'"));
  CHECK(!fs::exists(dir / "failed" / "train-shards.json"));

  // "skip": the 8 good files written, the 3 bad ones listed with their reasons, in one run.
  const tp::test::HostRun skipped = tp::test::run_host("shards write --config '" + config + "' --out '" +
                                                       (dir / "skipped").string() +
                                                       "' --set data.on_bad_sample='\"skip\"'");
  INFO(skipped.output);
  REQUIRE(skipped.exit_code == 0);
  CHECK(contains(skipped.output, "8 samples of data.train (split train, 2 classes"));
  CHECK(contains(skipped.output, "3 bad files left out"));
  CHECK(contains(skipped.output, "# 3 bad files left out (data.on_bad_sample = \"skip\"):"));
  CHECK(contains(skipped.output, "#   c1/empty.jpg: host shards write: '" + (root / "c1" / "empty.jpg").string() +
                                     "' is empty (0 bytes)"));
  CHECK(files_named(skipped.output) == 3);
  const std::string description = tp::test::read_text(dir / "skipped" / "train-shards.json");
  CHECK(contains(description, "\"samples\": 8,"));
  CHECK(contains(description, "\"on_bad_sample\": \"skip\""));
  CHECK(contains(description, "\"source\": \"c0/cut.jpg\",\n      \"reason\": \"host shards write: '"));
  CHECK(files_named(description) == 3);
}

TEST_CASE("host plugins check --samples all lists every sample the dataset cannot read, with its file, then the count") {
  const fs::path dir = tp::test::fresh_dir("check_bad_files");
  const fs::path root = dir / "images";
  write_bad_folder(root);
  // Both splits from one folder: the bad files fall into train and val, and each is listed once.
  const std::string config = bad_folder_config(dir, root, "run.toml", "val_split = 0.5\n").string();
  const tp::test::HostRun run = tp::test::run_host("plugins check '" + std::string(tp::test::plugin_dir()) +
                                                   "/image_folder.so' --config '" + config + "' --samples all");
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK(contains(run.output, "[FAIL] org.torchhost.image_folder: 3 samples could not be read (train "));
  CHECK(files_named(run.output) == 3);
  CHECK(contains(run.output, "3 bad samples in all. A run stops at the first under data.on_bad_sample = \"fail\""));
  CHECK(contains(run.output, "The rest of the check passed: train: "));
  CHECK(contains(run.output, "1 checked, 1 failed"));
}
