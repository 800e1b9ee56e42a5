// The inference library on CUDA (framework/infer/, docs/deployment.md section 4): a tiny
// image_folder run trained and exported by `host` on the CPU, then opened by the library on the
// CPU and on "cuda": the same classes for every file, logits and probabilities within float
// rounding (cuDNN's convolutions are not the CPU's), from files and from their bytes, and four
// threads on one CUDA model get the single-threaded answers. The CPU model stays open beside the
// CUDA one (the two share the plugins), and a second CUDA model asking for the other TF32 setting
// is refused (LibTorch's switch is one per process).
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "gpu/gpu_helpers.h"
#include "support/class_folders.h"
#include "tp/infer/model.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;

tp::infer::OpenOptions options_on(const std::string& device) {
  return {.device = device, .plugin_dirs = {tp::test::plugin_dir()}};
}

}  // namespace

TEST_CASE("tp::infer on CUDA answers as on the CPU: the same classes, logits within float rounding") {
  REQUIRE_MESSAGE(at::hasCUDA(), tp::gpu_test::kNeedsCuda);
  const fs::path dir = tp::test::fresh_dir("gpu_infer");
  tp::test::write_dark_light_folders(dir / "train", 6);
  tp::test::write_dark_light_folders(dir / "val", 3);
  const fs::path cfg = dir / "run.toml", out = dir / "out", exported = dir / "model.safetensors";
  std::ofstream(cfg) << tp::test::dark_light_run_config("gpu_infer", dir / "train", dir / "val", 4, 6);
  const auto train = tp::test::run_host("train --config '" + cfg.string() + "' --output-dir '" + out.string() + "'");
  INFO(train.output);
  REQUIRE(train.exit_code == 0);
  const auto export_run = tp::test::run_host("export --checkpoint '" + (out / "checkpoints" / "last.pt").string() +
                                             "' --format safetensors --output '" + exported.string() + "'");
  INFO(export_run.output);
  REQUIRE(export_run.exit_code == 0);
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir / "val"))
    if (entry.is_regular_file()) files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() == 6);

  tp::infer::Model on_cpu = tp::infer::Model::open(exported.string(), options_on("cpu"));
  const tp::infer::Batch cpu = on_cpu.run_files(files, 2);
  tp::infer::Model model = tp::infer::Model::open(exported.string(), options_on("cuda"));
  const tp::infer::Batch gpu = model.run_files(files, 2);
  CHECK(on_cpu.run_files(files, 2).output("logits").values == cpu.output("logits").values);
  tp::infer::OpenOptions tf32 = options_on("cuda");
  tf32.tf32 = true;
  try {
    tp::infer::Model::open(exported.string(), tf32);
    FAIL("a CUDA model with tf32 = true opened beside one with tf32 = false");
  } catch (const tp::infer::Error& e) {
    CHECK(std::string(e.what()).find("TF32 switches are one per process") != std::string::npos);
  }
  const std::vector<float>& a = cpu.output("logits").values;
  const std::vector<float>& b = gpu.output("logits").values;
  REQUIRE(a.size() == b.size());
  double largest = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    largest = std::max(largest, std::abs(static_cast<double>(a[i]) - b[i]) / std::max(1.0, std::abs(static_cast<double>(a[i]))));
  MESSAGE("gpu figure: tp::infer cuda vs cpu, largest logit difference " << largest);
  CHECK(largest < 1e-3);  // float rounding of another convolution algorithm, not another model
  REQUIRE(gpu.top.size() == files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    INFO(files[i]);
    CHECK(gpu.top[i][0].name == cpu.top[i][0].name);
    CHECK(gpu.top[i][0].probability == doctest::Approx(cpu.top[i][0].probability).epsilon(1e-3));
  }

  // The files' bytes decode as the files do, on the device too.
  std::vector<std::vector<unsigned char>> bytes;
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    bytes.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  CHECK(model.run_encoded(bytes, 2).output("logits").values == b);

  // Four threads on the one CUDA model get what one caller gets (calls are serialized inside).
  std::vector<std::vector<float>> answers(4);
  std::vector<std::thread> callers;
  for (std::size_t t = 0; t < answers.size(); ++t)
    callers.emplace_back([&, t] { answers[t] = model.run_files(files, 1).output("logits").values; });
  for (std::thread& caller : callers) caller.join();
  for (const std::vector<float>& answer : answers) CHECK(answer == b);
}
