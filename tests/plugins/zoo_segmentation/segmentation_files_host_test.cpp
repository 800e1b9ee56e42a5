// A segmenter's predictions line up with the image files (pixel_maps.h): LR-ASPP trained two
// steps on segmentation_folder, whose val images have three different sizes and are resized to a
// shorter side of 24 for the network. `host predict` writes each map at its file's size in every
// format that can hold it (png: the class map; jsonl: the scores as arrays), refuses npy with the
// reason while the sizes differ and writes it when they agree; the inference library returns the
// same scores, bit for bit for the same batch and thread count (OpenOptions::threads), with each
// file's size.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "integration/host_runner.h"
#include "tp/framework/error.h"
#include "tp/infer/model.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;

struct FileSize {
  int height, width;
};
/// The val files' sizes: three shapes, one repeated.
const std::vector<FileSize> kValSizes = {{40, 48}, {48, 36}, {30, 44}, {40, 48}};

// <root>/images/<i>.png and <root>/masks/<i>.png: a bright rectangle (class 1) and a dark one
// (class 2) on a grey background (class 0).
void write_pairs(const fs::path& root, const std::vector<FileSize>& sizes) {
  fs::create_directories(root / "images");
  fs::create_directories(root / "masks");
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const auto [h, w] = sizes[i];
    cv::Mat image(h, w, CV_8UC3, cv::Scalar(120, 120, 120));
    cv::Mat mask(h, w, CV_8UC1, cv::Scalar(0));
    const cv::Rect bright(int(i) % 5, 2, w / 3, h / 2), dark(w / 2, h / 3, w / 3, h / 2);
    image(bright).setTo(cv::Scalar(240, 230, 220));
    mask(bright).setTo(1);
    image(dark).setTo(cv::Scalar(20, 30, 10 + 10 * int(i)));
    mask(dark).setTo(2);
    REQUIRE(cv::imwrite((root / "images" / (std::to_string(i) + ".png")).string(), image));
    REQUIRE(cv::imwrite((root / "masks" / (std::to_string(i) + ".png")).string(), mask));
  }
}

struct Trained {
  fs::path dir, config, out, exported;
  Trained()
      : dir(tp::test::fresh_dir("segmentation_files")),
        config(dir / "run.toml"),
        out(dir / "run"),
        exported(dir / "model.safetensors") {
    write_pairs(dir / "train", std::vector<FileSize>(8, {40, 40}));
    write_pairs(dir / "val", kValSizes);
    std::ofstream(config) << "[run]\nseed = 3\ndevice = \"cpu\"\n[train]\nepochs = 1\nbatch_size = 4\n"
                             "[eval]\nbatch_size = 4\n[data]\nnum_workers = 1\n"
                             "[data.train]\ncomponent = \"org.torchhost.segmentation_folder\"\nroot = \""
                          << (dir / "train").string() << "\"\nval_root = \"" << (dir / "val").string()
                          << "\"\ncrop_size = [32]\nresize = [24]\nnum_classes = 3\n"
                             "class_names = [\"background\", \"bright\", \"dark\"]\n"
                             "mean = [0.485, 0.456, 0.406]\nstd = [0.229, 0.224, 0.225]\n"
                             "[model]\ncomponent = \"org.torchhost.segmentation\"\narch = \"lraspp_mobilenet_v3_large\"\n"
                             "num_classes = 3\n[loss]\ncomponent = \"org.torchhost.cross_entropy\"\noutput = \"out\"\n"
                             "target = \"mask\"\nignore_index = 255\n";
    const auto train = tp::test::run_host("train --config '" + config.string() + "' --output-dir '" + out.string() + "'");
    INFO(train.output);
    REQUIRE(train.exit_code == tp::kExitOk);
    const auto exported_run = tp::test::run_host("export --checkpoint '" + (out / "checkpoints" / "last.pt").string() +
                                                 "' --format safetensors --output '" + exported.string() + "'");
    INFO(exported_run.output);
    REQUIRE(exported_run.exit_code == tp::kExitOk);
  }
  tp::test::HostRun predict(const std::string& args) const {
    return tp::test::run_host("predict --config '" + config.string() + "' --output-dir '" + out.string() +
                              "' --checkpoint last " + args);
  }
};

const Trained& trained() {
  static const Trained run;
  return run;
}

/// Each jsonl line's "out": [C][H][W] scores.
using Scores = std::vector<std::vector<std::vector<float>>>;
std::vector<Scores> jsonl_maps(const fs::path& file) {
  std::vector<Scores> maps;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) maps.push_back(nlohmann::json::parse(line).at("out").get<Scores>());
  return maps;
}

}  // namespace

TEST_CASE("host predict: a segmenter's maps have each file's size in png and jsonl, and agree") {
  const Trained& run = trained();
  const fs::path png = run.dir / "maps", jsonl = run.dir / "scores.jsonl";
  const auto maps = run.predict("--format png --output '" + png.string() + "'");
  INFO(maps.output);
  REQUIRE(maps.exit_code == tp::kExitOk);
  const auto scores = run.predict("--format jsonl --output '" + jsonl.string() + "'");
  INFO(scores.output);
  REQUIRE(scores.exit_code == tp::kExitOk);
  CHECK(scores.output.find("out (array per line)") != std::string::npos);
  const std::vector<Scores> rows = jsonl_maps(jsonl);
  REQUIRE(rows.size() == kValSizes.size());
  for (std::size_t i = 0; i < kValSizes.size(); ++i) {
    INFO("file " << i);
    const cv::Mat map = cv::imread((png / (std::to_string(i) + ".png")).string(), cv::IMREAD_UNCHANGED);
    REQUIRE(map.rows == kValSizes[i].height); // the network saw 24 x 29, 32 x 24 or 24 x 35
    REQUIRE(map.cols == kValSizes[i].width);
    const Scores& s = rows[i];
    REQUIRE(s.size() == 3);
    REQUIRE(s[0].size() == std::size_t(kValSizes[i].height));
    REQUIRE(s[0][0].size() == std::size_t(kValSizes[i].width));
    // The class map is the argmax of the scores, pixel by pixel.
    int differ = 0;
    for (int y = 0; y < map.rows; ++y)
      for (int x = 0; x < map.cols; ++x) {
        int best = 0;
        for (int c = 1; c < 3; ++c)
          if (s[c][y][x] > s[best][y][x]) best = c;
        differ += best != map.at<uint8_t>(y, x);
      }
    CHECK(differ == 0);
  }
}

TEST_CASE("host predict: npy refuses per-pixel maps of different sizes, naming the way out, and writes equal ones") {
  const Trained& run = trained();
  const fs::path npy = run.dir / "scores.npy";
  const auto refused = run.predict("--format npy --output '" + npy.string() + "'");
  INFO(refused.output);
  CHECK(refused.exit_code == tp::kExitConfig);
  CHECK(refused.output.find("per-pixel map") != std::string::npos);
  CHECK(refused.output.find("--format png") != std::string::npos);
  CHECK_FALSE(fs::exists(npy));
  // Files 0 and 3 share a size: one column of [3, 40, 48] scores.
  const fs::path same = run.dir / "same";
  fs::create_directories(same);
  fs::copy_file(run.dir / "val" / "images" / "0.png", same / "a.png");
  fs::copy_file(run.dir / "val" / "images" / "3.png", same / "b.png");
  const auto written = run.predict("--format npy --images '" + same.string() + "' --output '" + npy.string() + "'");
  INFO(written.output);
  REQUIRE(written.exit_code == tp::kExitOk);
  std::ifstream in(npy, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(bytes.find("('out', '<f4', (3,40,48,))") != std::string::npos);
}

TEST_CASE("tp::infer: a segmenter's scores at each file's size with <name>_sizes, equal to host predict's") {
  const Trained& run = trained();
  const fs::path jsonl = run.dir / "files.jsonl";
  const auto predicted = run.predict("--set run.threads=1 --format jsonl --images '" +
                                     (run.dir / "val" / "images").string() + "' --output '" + jsonl.string() + "'");
  INFO(predicted.output);
  REQUIRE(predicted.exit_code == tp::kExitOk);
  const std::vector<Scores> rows = jsonl_maps(jsonl);
  REQUIRE(rows.size() == kValSizes.size());
  std::vector<std::string> files;
  for (std::size_t i = 0; i < kValSizes.size(); ++i)
    files.push_back((run.dir / "val" / "images" / (std::to_string(i) + ".png")).string());
  // One intra-op thread on both sides (host predict: --set run.threads=1): LR-ASPP's scores move
  // by about 2e-8 between 1 and 2 threads (docs/deployment.md, "Same batch, same bits").
  tp::infer::Model model = tp::infer::Model::open(
      run.exported.string(), {.device = "cpu", .plugin_dirs = {tp::test::plugin_dir()}, .threads = 1});
  // The export names the mask's classes (segmentation_folder's class_names).
  CHECK(model.class_names() == std::vector<std::string>{"background", "bright", "dark"});
  // eval.batch_size = 4: host predict ran the four files as one batch, as the library does.
  const tp::infer::Batch batch = model.run_files(files, 0);
  const tp::infer::Tensor& out = batch.output("out");
  const tp::infer::Tensor& sizes = batch.output("out_sizes");
  REQUIRE(out.shape == std::vector<int64_t>{4, 3, 48, 48}); // the tallest file's height, the widest's width
  REQUIRE(sizes.shape == std::vector<int64_t>{4, 2});
  for (std::size_t i = 0; i < kValSizes.size(); ++i) {
    INFO("file " << i);
    const int h = kValSizes[i].height, w = kValSizes[i].width;
    CHECK(sizes.values[2 * i] == float(h));
    CHECK(sizes.values[2 * i + 1] == float(w));
    int differ = 0, padding = 0;
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 48; ++y)
        for (int x = 0; x < 48; ++x) {
          const float value = out.values[((i * 3 + c) * 48 + y) * 48 + x];
          if (y < h && x < w) differ += value != rows[i][c][y][x];
          else padding += value != 0.F;
        }
    CHECK(differ == 0);
    CHECK(padding == 0);
  }
}

// A trial's val images differ in size, so their batches pad: --tta hflip was refused. Each image
// is now mirrored within its own width (its padding staying on the right) and its map flipped back
// so: the TTA scores of a file equal the mean of its plain scores and the flipped-back scores of
// its mirrored file, predicted in the same batch shape (bilinear resizing commutes with the mean
// and the flip, to float rounding).
TEST_CASE("host predict --tta hflip on images of different sizes: the mean with the mirrored files' maps") {
  const Trained& run = trained();
  const fs::path mirrored_dir = run.dir / "mirrored";
  fs::create_directories(mirrored_dir);
  for (std::size_t i = 0; i < kValSizes.size(); ++i) {
    const std::string name = std::to_string(i) + ".png";
    cv::Mat image = cv::imread((run.dir / "val" / "images" / name).string(), cv::IMREAD_COLOR), flipped;
    cv::flip(image, flipped, 1);
    REQUIRE(cv::imwrite((mirrored_dir / name).string(), flipped));
  }
  const auto jsonl_of = [&](const std::string& args, const std::string& file) {
    const auto run_result = run.predict("--format jsonl " + args + " --output '" + (run.dir / file).string() + "'");
    INFO(run_result.output);
    REQUIRE(run_result.exit_code == tp::kExitOk);
    return jsonl_maps(run.dir / file);
  };
  const std::string val = "--images '" + (run.dir / "val" / "images").string() + "'";
  const std::vector<Scores> tta = jsonl_of(val + " --tta hflip", "tta.jsonl");
  const std::vector<Scores> plain = jsonl_of(val, "plain.jsonl");
  const std::vector<Scores> mirror = jsonl_of("--images '" + mirrored_dir.string() + "'", "mirror.jsonl");
  REQUIRE(tta.size() == kValSizes.size());
  for (std::size_t i = 0; i < kValSizes.size(); ++i) {
    INFO("file " << i);
    const int h = kValSizes[i].height, w = kValSizes[i].width;
    REQUIRE(tta[i][0].size() == std::size_t(h));
    REQUIRE(tta[i][0][0].size() == std::size_t(w));
    double worst = 0;
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
          const double expected = (double(plain[i][c][y][x]) + mirror[i][c][y][w - 1 - x]) / 2;
          worst = std::max(worst, std::abs(expected - tta[i][c][y][x]));
        }
    CHECK(worst < 1e-4);
  }
}

// Two ranks deal one process's batches whole (sampler.h, block): by stride a padded batch held
// other images, so other padding, and a segmenter's 2-rank scores differed from one process's.
TEST_CASE("host predict on 2 ranks writes one process's per-pixel scores byte for byte, padded batches included") {
  const Trained& run = trained();
  const std::string args = "--set run.threads=1 --set eval.batch_size=2 --format jsonl --output '";
  const auto one = run.predict(args + (run.dir / "one_rank.jsonl").string() + "'");
  INFO(one.output);
  REQUIRE(one.exit_code == tp::kExitOk);
  const auto two = tp::test::run_host("--nproc-per-node 2 predict --config '" + run.config.string() +
                                      "' --output-dir '" + run.out.string() + "' --checkpoint last " + args +
                                      (run.dir / "two_ranks.jsonl").string() + "'");
  INFO(two.output);
  REQUIRE(two.exit_code == tp::kExitOk);
  CHECK(tp::test::read_text(run.dir / "one_rank.jsonl") == tp::test::read_text(run.dir / "two_ranks.jsonl"));
}

TEST_CASE("host export: a segmenter's per-pixel output is [N, C, H, W] with H and W the input's, and says what it means") {
  // Deployment trial F9: written as the plugin's example size, ["N", 3, 224, 224], with no meaning,
  // for a run that evaluated at another size.
  const Trained& run = trained();
  std::ifstream in(run.exported, std::ios::binary);
  uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), sizeof length);
  std::string header(length, '\0');
  in.read(header.data(), static_cast<std::streamsize>(length));
  REQUIRE(in.good());
  const nlohmann::json outputs =
      nlohmann::json::parse(nlohmann::json::parse(header).at("__metadata__").at("torchhost.outputs").get<std::string>());
  INFO(outputs.dump());
  CHECK(outputs.at("out").at("shape") == nlohmann::json({"N", 3, "H", "W"}));
  const std::string meaning = outputs.at("out").at("meaning").get<std::string>();
  CHECK(meaning.find("class scores per pixel before softmax") != std::string::npos);
  CHECK(meaning.find("argmax over dim 1 is the class map") != std::string::npos);
}
