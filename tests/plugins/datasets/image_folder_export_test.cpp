// End to end (issue 60, part 2): a tiny image_folder run trained by `host`, exported and predicted.
// The export carries what a deployment needs to reproduce `host predict` without the run: the
// class folder names (plugin ABI 1.12, kept in the checkpoint), the model and its options, the
// outputs, the evaluation table with fast_decode spelled out, the plugins' hashes; predict's rows
// name the class of each argmax.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <doctest/doctest.h>

#include "integration/host_runner.h"
#include "support/class_folders.h"
#include "support/test_paths.h"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

/// The "__metadata__" of a safetensors file: its header is an 8-byte little-endian length, then JSON.
Json metadata_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), sizeof length);
  std::string header(length, '\0');
  in.read(header.data(), static_cast<std::streamsize>(length));
  REQUIRE(in.good());
  return Json::parse(header).at("__metadata__");
}

/// A dark/light image_folder run (`per_class` training and `val_per_class` validation images a
/// class, small_cnn) trained by `host` in a fresh directory `name`, with `sets` added to its
/// command line, and its last.pt exported to dir/model.safetensors.
struct ExportedRun {
  fs::path dir, cfg, out, exported;
};
ExportedRun trained_and_exported(const std::string& name, int per_class, int val_per_class, const std::string& sets = "") {
  ExportedRun run{tp::test::fresh_dir(name), {}, {}, {}};
  tp::test::write_dark_light_folders(run.dir / "train", per_class);
  tp::test::write_dark_light_folders(run.dir / "val", val_per_class);
  run.cfg = run.dir / "run.toml";
  std::ofstream(run.cfg) << tp::test::dark_light_run_config(name, run.dir / "train", run.dir / "val", per_class);
  run.out = run.dir / "out";
  const auto train =
      tp::test::run_host("train --config '" + run.cfg.string() + "' --output-dir '" + run.out.string() + "'" + sets);
  INFO(train.output);
  REQUIRE(train.exit_code == 0);
  run.exported = run.dir / "model.safetensors";
  const auto exported = tp::test::run_host("export --checkpoint '" + (run.out / "checkpoints" / "last.pt").string() +
                                           "' --format safetensors --output '" + run.exported.string() + "'");
  INFO(exported.output);
  REQUIRE(exported.exit_code == 0);
  CHECK(exported.output.find("torchhost.outputs is not written") == std::string::npos);
  return run;
}

}  // namespace

TEST_CASE("host export carries the classes, model, outputs and preprocessing; predict names each argmax's class") {
  const auto [dir, cfg, out, exported] = trained_and_exported("image_folder_export", 8, 3);
  const Json metadata = metadata_of(exported);
  INFO(metadata.dump(2));
  CHECK(Json::parse(metadata.at("torchhost.classes").get<std::string>()) == Json({"dark", "light"}));
  CHECK(metadata.at("torchhost.class_field") == "label");
  const Json model = Json::parse(metadata.at("torchhost.model").get<std::string>());
  CHECK(model.at("component") == "org.torchhost.small_cnn");
  CHECK(model.at("options").at("num_classes") == 2);
  CHECK(model.at("options").at("image_size") == 32);
  const Json outputs = Json::parse(metadata.at("torchhost.outputs").get<std::string>());
  CHECK(outputs.at("logits").at("shape") == Json({"N", 2}));
  CHECK(outputs.at("logits").at("dtype") == "float32");
  CHECK(outputs.at("logits").at("meaning").get<std::string>().find("torchhost.classes[i]") != std::string::npos);
  // The val split was read from [data.train] (val_root, val_from_train): its eval transform's keys.
  const Json pre = Json::parse(metadata.at("torchhost.preprocessing").get<std::string>());
  CHECK(pre.at("split") == "val");
  CHECK(pre.at("table") == "data.train");
  CHECK(pre.at("component") == "org.torchhost.image_folder");
  CHECK(pre.at("options").at("resize") == Json({32, 32}));
  CHECK(pre.at("options").at("mean") == Json({0.5, 0.5, 0.5}));
  CHECK(pre.at("options").at("std") == Json({0.25, 0.25, 0.25}));
  CHECK(pre.at("decode").at("fast_decode") == true); // the default, and the parity trap
  CHECK(pre.at("decode").at("note").get<std::string>().find("reduced DCT scale") != std::string::npos);
  bool hashed = false;
  for (const Json& plugin : Json::parse(metadata.at("torchhost.plugin_files").get<std::string>()))
    hashed |= plugin.at("library") == "image_folder.so" && plugin.at("sha256").get<std::string>().size() == 64;
  CHECK(hashed);
  CHECK(metadata.dump().find("[logging") == std::string::npos); // only the model and data tables
  // Which build wrote it and the metadata format (deployment trial F11): plain strings.
  CHECK(metadata.at("torchhost.format") == "1");
  const auto version = tp::test::run_host("--version"); // the same build, in host --version's words
  INFO(version.output);
  REQUIRE(version.exit_code == 0);
  CHECK(!metadata.at("torchhost.version").get<std::string>().empty());
  CHECK(version.output.find("torchhost " + metadata.at("torchhost.version").get<std::string>() + "\n") == 0);
  CHECK(version.output.find("\nLibTorch " + metadata.at("torchhost.libtorch").get<std::string>() + "\n") !=
        std::string::npos);
  CHECK(version.output.find("\nplugin ABI " + metadata.at("torchhost.plugin_abi").get<std::string>() + " (") !=
        std::string::npos);

  // --plugin-dir, as predict.md promises for torchhost.outputs (F3): was refused as a configuration error.
  fs::create_directories(dir / "more_plugins");
  const auto with_dir = tp::test::run_host("export --checkpoint '" + (out / "checkpoints" / "last.pt").string() +
                                           "' --format safetensors --output '" + (dir / "again.safetensors").string() +
                                           "' --plugin-dir '" + (dir / "more_plugins").string() + "'");
  INFO(with_dir.output);
  CHECK(with_dir.exit_code == 0);
  CHECK(metadata_of(dir / "again.safetensors").contains("torchhost.outputs"));

  // The export given where a checkpoint belongs is named as an export, not as a damaged checkpoint (F10).
  const auto wrong = tp::test::run_host("predict --config '" + cfg.string() + "' --output-dir '" + out.string() +
                                        "' --checkpoint '" + exported.string() + "' --split val --output '" +
                                        (dir / "wrong.csv").string() + "'");
  INFO(wrong.output);
  CHECK(wrong.exit_code == 4);
  CHECK(wrong.output.find(exported.string() + " is a safetensors file, such as `host export` writes") != std::string::npos);
  CHECK(wrong.output.find("damaged") == std::string::npos);

  const fs::path predictions = dir / "predictions.csv";
  const auto predict = tp::test::run_host("predict --config '" + cfg.string() + "' --output-dir '" + out.string() +
                                          "' --checkpoint last --split val --output '" + predictions.string() + "'");
  INFO(predict.output);
  REQUIRE(predict.exit_code == 0);
  CHECK(predict.output.find("columns: index, path, logits, logits.argmax, logits.class, logits.prob, label") != std::string::npos);
  std::ifstream rows(predictions);
  std::string line;
  REQUIRE(std::getline(rows, line));
  CHECK(line.find("logits.argmax,logits.class,logits.prob,label") != std::string::npos);
  int checked = 0;
  while (std::getline(rows, line)) {
    // index,path,logits.0,logits.1,logits.argmax,logits.class,logits.prob,label
    std::vector<std::string> cells;
    for (std::size_t at = 0, next = 0; next != std::string::npos; at = next + 1)
      cells.push_back(line.substr(at, (next = line.find(',', at)) == std::string::npos ? next : next - at));
    REQUIRE(cells.size() == 8);
    CHECK(cells[1].starts_with((dir / "val").string() + "/"));
    CHECK(cells[5] == (cells[4] == "0" ? "dark" : "light"));
    ++checked;
  }
  CHECK(checked == 6);
}

TEST_CASE("a model whose image_size is not its declared examples': export writes its outputs, plugins check passes") {
  // small_cnn declares [3, 32, 32] examples; at image_size 48 they do not fit. Before, `host
  // export` left torchhost.outputs out and `host plugins check --config` failed a model that trains.
  const auto [dir, cfg, out, exported] = trained_and_exported(
      "image_folder_export_48", 4, 2, " --set data.train.resize=[48,48] --set model.image_size=48");
  const Json outputs = Json::parse(metadata_of(exported).at("torchhost.outputs").get<std::string>());
  CHECK(outputs.at("logits").at("shape") == Json({"N", 2}));

  const auto check = tp::test::run_host("plugins check '" + std::string(tp::test::plugin_dir()) +
                                        "/vision_models.so' --config '" + (out / "config.toml").string() + "'");
  INFO(check.output);
  CHECK(check.exit_code == 0);
  CHECK(check.output.find("[ok] org.torchhost.small_cnn: ") != std::string::npos);
  CHECK(check.output.find("on the run's first training samples (its example inputs do not fit the run's options: ") != std::string::npos);
}

TEST_CASE("interpolation = \"bicubic\": the export records it, predict resizes with it, data.decode = \"gpu\" is refused") {
  // Migration trial F13: timm's bicubic weights. The 32x32 images are enlarged to 48, so the resize matters.
  const std::string sets = " --set data.train.resize=[48,48] --set model.image_size=48"
                           " --set data.train.interpolation=\"bicubic\" --set data.decode=\"auto\"";
  const auto [dir, cfg, out, exported] = trained_and_exported("image_folder_bicubic", 4, 2, sets);
  // data.decode = "auto" fell back to the CPU path, saying why.
  const std::string runtime = tp::test::read_text(out / "runtime.toml");
  INFO(runtime);
  CHECK(runtime.find("interpolation = \\\"bicubic\\\"") != std::string::npos);
  // tp::infer builds the export's preprocessing from these options, the bicubic key among them.
  const Json pre = Json::parse(metadata_of(exported).at("torchhost.preprocessing").get<std::string>());
  CHECK(pre.at("options").at("interpolation") == "bicubic");
  // Its JPEGs were decoded at full size (bicubic ignores fast_decode): the note must not say otherwise.
  CHECK(pre.at("decode").at("note").get<std::string>().find("ignores fast_decode") != std::string::npos);

  // host predict reads the run's table: bicubic; the same file read bilinearly gives other logits
  // (a textured one: a flat colour resizes to itself either way).
  cv::Mat textured(32, 32, CV_8UC3);
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 32; ++x)
      textured.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uchar>((x / 2 + y / 3) % 2 * 200), static_cast<uchar>(8 * x),
                                               static_cast<uchar>(255 - 8 * y));
  REQUIRE(cv::imwrite((dir / "textured.png").string(), textured));
  const auto predict = [&](const std::string& file, const std::string& more) {
    const auto run = tp::test::run_host("predict --config '" + cfg.string() + "' --output-dir '" + out.string() +
                                        "' --checkpoint last --images '" + (dir / "textured.png").string() +
                                        "' --output '" + (dir / file).string() + "'" + sets + more);
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    return tp::test::read_text(dir / file);
  };
  const std::string bicubic = predict("bicubic.csv", "");
  CHECK(bicubic == predict("again.csv", ""));
  CHECK(bicubic != predict("bilinear.csv", " --set data.train.interpolation=\"bilinear\""));

  // The device decoder resizes bilinearly: "gpu" stops before a step, naming both keys (exit 2).
  const auto gpu = tp::test::run_host("train --config '" + cfg.string() + "' --output-dir '" + (dir / "gpu").string() +
                                      "'" + sets + " --set data.decode=\"gpu\"");
  INFO(gpu.output);
  CHECK(gpu.exit_code == 2);
  CHECK(gpu.output.find("data.decode = \"gpu\" cannot decode the train split's images on the device") != std::string::npos);
  CHECK(gpu.output.find("interpolation = \"bicubic\" changes decoded pixels") != std::string::npos);
}
