// configs/segment_shapes.toml through the real host, shortened (40 val images of 64x64, one
// epoch of 12 steps): shapes' segment task, LR-ASPP, cross entropy with ignore_index and
// mean_iou. 2-rank evaluation gives the 1-process confusion-matrix scores exactly (the [K, K]
// state summed across ranks); `host predict --format png` writes one 8-bit greyscale class map
// of the image's size per sample, and the same files byte for byte under 2 ranks; `host verify`
// passes its checks on the config.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "integration/host_runner.h"
#include "support/dir_entries.h"
#include "tp/framework/error.h"
#include "verify/verify_runner.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;
using tp::test::json_number;
using tp::test::names_in;

const std::string kConfig =
    "--config configs/segment_shapes.toml --set train.epochs=1 --set train.batch_size=8 --set data.train.size=96 "
    "--set data.train.val_size=40 --set schedule.warmup_steps=2 --set 'progress.mode=\"off\"' ";

const fs::path& trained_run() {
  static const fs::path dir = [] {
    const fs::path d = tp::test::fresh_dir("segment_shapes_run");
    const auto run = tp::test::run_host("--output-dir '" + d.string() + "' " + kConfig);
    INFO(run.output);
    REQUIRE(run.exit_code == tp::kExitOk);
    return d;
  }();
  return dir;
}

std::string bytes_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

uint32_t big_endian(const std::string& bytes, std::size_t at) {
  return (uint32_t(uint8_t(bytes[at])) << 24) | (uint32_t(uint8_t(bytes[at + 1])) << 16) |
         (uint32_t(uint8_t(bytes[at + 2])) << 8) | uint32_t(uint8_t(bytes[at + 3]));
}

}  // namespace

TEST_CASE("segment_shapes: 2-rank evaluation gives the 1-process mean IoU, pixel accuracy and per-class IoU") {
  const fs::path& dir = trained_run();
  const auto one = tp::test::run_host("eval --output-dir '" + dir.string() + "' " + kConfig + "--checkpoint last");
  INFO(one.output);
  REQUIRE(one.exit_code == tp::kExitOk);
  const std::string single = tp::test::read_text(dir / "eval_last.json");
  const auto two = tp::test::run_host("--nproc-per-node 2 eval --output-dir '" + dir.string() + "' " + kConfig +
                                      "--checkpoint last");
  INFO(two.output);
  REQUIRE(two.exit_code == tp::kExitOk);
  const std::string both = tp::test::read_text(dir / "eval_last.json");
  for (const char* key : {"val/miou", "val/pixel_accuracy", "val/mean_accuracy", "val/iou_0", "val/iou_1", "val/iou_2",
                          "val/iou_3"}) {
    INFO(key);
    CHECK(json_number(both, key) == json_number(single, key));
  }
  CHECK(json_number(single, "val/pixel_accuracy") > 0.0);
  CHECK(json_number(both, "val/loss") == doctest::Approx(json_number(single, "val/loss")).epsilon(1e-6));
}

TEST_CASE("segment_shapes: predict --format png writes a class map per image, the same files under 2 ranks") {
  const fs::path& dir = trained_run();
  const fs::path one = dir / "maps_1";
  const fs::path two = dir / "maps_2";
  for (const auto& [out, launcher] : {std::pair{one, std::string()}, std::pair{two, std::string("--nproc-per-node 2 ")}}) {
    const auto run = tp::test::run_host(launcher + "predict --output-dir '" + dir.string() + "' " + kConfig +
                                        "--checkpoint last --format png --output '" + out.string() + "'");
    INFO(run.output);
    REQUIRE(run.exit_code == tp::kExitOk);
    CHECK(run.output.find("for 40 samples of the val split") != std::string::npos);
  }
  const std::vector<std::string> files = names_in(one);
  REQUIRE(files.size() == 42);  // 0.png .. 39.png, predictions.csv and the marker .torchhost-predictions
  CHECK(std::find(files.begin(), files.end(), ".torchhost-predictions") != files.end());
  CHECK((names_in(two) == files));
  CHECK(tp::test::read_text(one / "predictions.csv").starts_with("index\n0\n1\n"));
  for (int i = 0; i < 40; ++i) {
    const std::string name = std::to_string(i) + ".png";
    const std::string png = bytes_of(one / name);
    INFO(name);
    REQUIRE(png.size() > 33);
    CHECK(png.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
    CHECK(big_endian(png, 16) == 64);  // width: the image's
    CHECK(big_endian(png, 20) == 64);  // height
    CHECK(int(uint8_t(png[24])) == 8); // bit depth: 4 classes fit 8 bits
    CHECK(int(uint8_t(png[25])) == 0); // colour type: greyscale, the class id as the value
    CHECK(png == bytes_of(two / name));
  }
  // No partial directory is left behind.
  for (const auto& entry : fs::directory_iterator(dir))
    CHECK(entry.path().filename().string().find(".partial-") == std::string::npos);
}

TEST_CASE("segment_shapes: predict --format png replaces only its own earlier output, never anything else") {
  const fs::path& dir = trained_run();
  const auto png_into = [&](const fs::path& out) {
    return tp::test::run_host("predict --output-dir '" + dir.string() + "' " + kConfig +
                              "--checkpoint last --format png --output '" + out.string() + "'");
  };
  // A directory of the user's, with a file in it: refused, untouched (it was deleted before).
  const fs::path canary = dir / "canary";
  fs::create_directories(canary);
  std::ofstream(canary / "notes.txt") << "mine";
  const auto into_canary = png_into(canary);
  INFO(into_canary.output);
  CHECK(into_canary.exit_code == tp::kExitConfig);
  CHECK(into_canary.output.find("'notes.txt'") != std::string::npos);
  CHECK(names_in(canary) == std::vector<std::string>{"notes.txt"});
  // The run directory itself: refused; its checkpoints stay.
  const auto into_run = png_into(dir);
  INFO(into_run.output);
  CHECK(into_run.exit_code == tp::kExitConfig);
  CHECK(fs::exists(dir / "checkpoints" / "last.pt"));
  // A regular file where a directory would go: refused, unchanged.
  std::ofstream(dir / "a_file") << "keep";
  const auto into_file = png_into(dir / "a_file");
  INFO(into_file.output);
  CHECK(into_file.exit_code == tp::kExitConfig);
  CHECK(tp::test::read_text(dir / "a_file") == "keep");
  // An earlier png output (its marker, predictions.csv and <n>.png) is replaced whole...
  const fs::path maps = dir / "maps_again";
  for (int round = 0; round < 2; ++round) {
    const auto run = png_into(maps);
    INFO(run.output);
    REQUIRE(run.exit_code == tp::kExitOk);
    CHECK(names_in(maps).size() == 42);
  }
  for (const auto& entry : fs::directory_iterator(dir))
    CHECK(entry.path().filename().string().find(".replaced-") == std::string::npos);
  // ...unless something was added to it since: then it is not the host's to replace.
  std::ofstream(maps / "extra.txt") << "added";
  const auto after_edit = png_into(maps);
  INFO(after_edit.output);
  CHECK(after_edit.exit_code == tp::kExitConfig);
  CHECK(fs::exists(maps / "extra.txt"));
  CHECK(fs::exists(maps / "0.png"));
}

TEST_CASE("segment_shapes: host verify passes its checks") {
  const auto run = tp::test::verify("verify_segment_shapes",
                                    kConfig + "--steps 2 --checks data,loss,metric,gradients,accumulation,resume,distributed");
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitOk);
  for (const char* check : {"data", "loss", "metric", "gradients", "accumulation", "resume", "distributed"}) {
    INFO(check);
    CHECK(tp::test::result_of(run.output, check) == "PASS");
  }
}
