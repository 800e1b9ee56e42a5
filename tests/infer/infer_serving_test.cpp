// Serving what a deployment engineer asked for (deployment trial F14, F8): OpenOptions::
// skip_bad_images (docs/deployment.md, "Bad images"), a batch with an image that cannot be read
// answers the others, in the C++ and the C API, and says which was left out and why (before, the
// one bad upload of a batch failed the whole call); and the export's metadata through the API.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include <doctest/doctest.h>

#include "error_of.h"
#include "infer_support.h"
#include "tp/infer/infer.h"
#include "tp/infer/model.h"

namespace {

namespace fs = std::filesystem;
using namespace tp::test::infer;
using tp::test::error_of;

}  // namespace

TEST_CASE("tp::infer: skip_bad_images answers the readable images and lists the others") {
  const Exported& run = exported();
  const fs::path corrupt = run.dir / "skip_corrupt.png";
  std::ofstream(corrupt) << "not a png";
  const std::vector<std::string> files = {run.files[0], corrupt.string(), run.files[2]};

  tp::infer::Model failing = tp::infer::Model::open(run.exported.string(), cpu_options());
  CHECK(error_of([&] { failing.run_files(files); }).find("skip_corrupt.png") != std::string::npos);

  tp::infer::OpenOptions options = cpu_options();
  options.skip_bad_images = true;
  tp::infer::Model model = tp::infer::Model::open(run.exported.string(), options);
  const tp::infer::Batch batch = model.run_files(files, 1);
  CHECK(batch.rows == std::vector<int64_t>{0, 2});
  REQUIRE(batch.failed.size() == 1);
  CHECK(batch.failed[0].index == 1);
  CHECK(batch.failed[0].message.find("image 1 ('" + corrupt.string() + "'): ") == 0);
  // The answers of the two readable files are those of a call with them alone.
  const tp::infer::Batch alone = model.run_files({run.files[0], run.files[2]}, 1);
  REQUIRE(batch.top.size() == 2);
  CHECK(batch.top[0][0].name == alone.top[0][0].name);
  CHECK(batch.top[1][0].probability == alone.top[1][0].probability);
  CHECK(batch.output("logits").values == alone.output("logits").values);
  CHECK(alone.rows == std::vector<int64_t>{0, 1});
  CHECK(alone.failed.empty());
  // In memory: named by position, not by the temporary file.
  std::ifstream in(run.files[0], std::ios::binary);
  const std::vector<unsigned char> good{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const tp::infer::Batch encoded = model.run_encoded({good, {'n', 'o'}}, 1);
  CHECK(encoded.rows == std::vector<int64_t>{0});
  REQUIRE(encoded.failed.size() == 1);
  CHECK(encoded.failed[0].message.find("image 1 ('encoded image 1'): ") == 0);
  CHECK(encoded.failed[0].message.find("tp_infer.") == std::string::npos); // no temporary path
  // Nothing readable: an Error either way.
  CHECK(error_of([&] { model.run_files({corrupt.string()}); }).find("none of the 1 images could be read") !=
        std::string::npos);
  // Switched off again for the calls from now on.
  model.set_skip_bad_images(false);
  CHECK(error_of([&] { model.run_files(files); }).find("skip_corrupt.png") != std::string::npos);
}

TEST_CASE("tp::infer C API: tp_infer_set_skip_bad_images, the rows and the images left out") {
  const Exported& run = exported();
  const fs::path corrupt = run.dir / "skip_corrupt_c.png";
  std::ofstream(corrupt) << "not a png";
  const std::vector<const char*> paths = {corrupt.c_str(), run.files[1].c_str()};
  tp_infer_model_t* model = nullptr;
  REQUIRE(tp_infer_open(run.exported.c_str(), "cpu", tp::test::plugin_dir(), &model) == TP_OK);
  tp_infer_result_t* result = nullptr;
  CHECK(tp_infer_run_files(model, paths.data(), 2, 1, &result) == TP_ERR_INVALID_ARGUMENT);
  CHECK(tp_infer_set_skip_bad_images(nullptr, 1) == TP_ERR_INVALID_ARGUMENT);
  REQUIRE(tp_infer_set_skip_bad_images(model, 1) == TP_OK);
  REQUIRE(tp_infer_run_files(model, paths.data(), 2, 1, &result) == TP_OK);
  CHECK(tp_infer_result_row(result, 0) == 1);
  CHECK(tp_infer_result_row(result, 1) == -1);
  REQUIRE(tp_infer_result_failed_count(result) == 1);
  int64_t image = -1;
  const char* message = nullptr;
  REQUIRE(tp_infer_result_failed(result, 0, &image, &message) == TP_OK);
  CHECK(image == 0);
  CHECK(std::string(message).find("skip_corrupt_c.png") != std::string::npos);
  CHECK(tp_infer_result_failed(result, 1, &image, &message) == TP_ERR_OUT_OF_RANGE);
  const char* name = nullptr;
  REQUIRE(tp_infer_result_class(result, 0, 0, nullptr, &name, nullptr) == TP_OK);
  CHECK(std::string(name) == run.rows[1].name);
  tp_infer_result_free(result);
  tp_infer_close(model);
}

TEST_CASE("tp::infer: the export's metadata through the API, what run_tensors' inputs need included") {
  // Before, a program had to parse the safetensors header itself to learn the input's size, mean
  // and std, the scores' kind or the build that wrote the export (deployment trial F8).
  const Exported& run = exported();
  const tp::infer::Model model = tp::infer::Model::open(run.exported.string(), cpu_options());
  const auto& metadata = model.metadata();
  REQUIRE(metadata.count("torchhost.preprocessing") == 1);
  const nlohmann::json preprocessing = nlohmann::json::parse(metadata.at("torchhost.preprocessing"));
  CHECK(preprocessing.at("options").at("resize") == nlohmann::json({32, 32}));
  CHECK(preprocessing.at("options").at("mean") == nlohmann::json({0.5, 0.5, 0.5}));
  CHECK(nlohmann::json::parse(metadata.at("torchhost.model")).at("component") == "org.torchhost.small_cnn");
  CHECK(metadata.count("torchhost.version") == 1);
  CHECK(metadata.count("torchhost.outputs") == 1);

  tp_infer_model_t* c_model = nullptr;
  REQUIRE(tp_infer_open(run.exported.c_str(), "cpu", tp::test::plugin_dir(), &c_model) == TP_OK);
  CHECK(std::string(tp_infer_model_metadata(c_model, "torchhost.preprocessing")) == metadata.at("torchhost.preprocessing"));
  CHECK(tp_infer_model_metadata(c_model, "no.such.key") == nullptr);
  CHECK(tp_infer_model_metadata(nullptr, "torchhost.model") == nullptr);
  REQUIRE(tp_infer_model_metadata_count(c_model) == metadata.size());
  uint32_t index = 0;
  for (const auto& [key, value] : metadata) CHECK(std::string(tp_infer_model_metadata_key(c_model, index++)) == key);
  CHECK(tp_infer_model_metadata_key(c_model, index) == nullptr);
  tp_infer_close(c_model);
}

TEST_CASE("tp::infer: threads = 0 is LibTorch's default count, whatever count another model's calls set") {
  // Serving trial F1: at::set_num_threads(n) of a model with threads = n also set the count every
  // new thread starts from, and a threads = 0 model left it so: 1.65x slower on new threads.
  const Exported& run = exported();
  const int cores = at::intraop_default_num_threads();
  tp::infer::Model main = tp::infer::Model::open(run.exported.string(), cpu_options());
  tp::infer::OpenOptions side_options = cpu_options();
  side_options.threads = cores + 1; // any count but the default
  tp::infer::Model side = tp::infer::Model::open(run.exported.string(), side_options);
  // The count a call leaves on a thread that begins with it (OpenMP keeps it per thread).
  const auto count_after = [&](tp::infer::Model& model) {
    int count = 0;
    std::thread([&] {
      model.run_files({run.files[0]}, 1);
      count = at::get_num_threads();
    }).join();
    return count;
  };
  CHECK(count_after(side) == cores + 1);
  CHECK(count_after(main) == cores);
  // set_threads(0) after a count of its own: the default again, not what the last call left.
  main.set_threads(1);
  CHECK(count_after(main) == 1);
  main.set_threads(0);
  CHECK(count_after(main) == cores);
}

TEST_CASE("tp::infer: an image whose scores are NaN has no best class, as host predict's argmax -1") {
  // Before, topk ranked the NaN first and named a class for a row with no answer, where host
  // predict (class_columns.cpp) writes argmax -1 and no class.
  const Exported& run = exported();
  tp::infer::Model model = tp::infer::Model::open(run.exported.string(), cpu_options());
  const std::size_t per_image = 3 * 32 * 32;
  tp::infer::Tensor input{"image", {2, 3, 32, 32}, std::vector<float>(2 * per_image, 0.5F)};
  std::fill(input.values.begin(), input.values.begin() + per_image, std::numeric_limits<float>::quiet_NaN());
  const tp::infer::Batch batch = model.run_tensors({input}, 2);
  REQUIRE(batch.top.size() == 2);
  CHECK(batch.top[0].empty());      // NaN scores: no class
  CHECK(batch.top[1].size() == 2);  // a finite row: its classes
  CHECK(!std::isnan(batch.output("logits").values[2]));
}
