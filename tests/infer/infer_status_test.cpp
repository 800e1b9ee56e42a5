// Whose fault a failure is (serving trial F2): tp::infer::Error::kind() and the C API's status
// tell the caller's bad input (TP_ERR_INVALID_ARGUMENT) from the deployment's (TP_ERR_CONFIG);
// before, everything but a NULL or a zero count was TP_ERR_IO, even set_threads(1024), which
// infer.h promised as TP_ERR_INVALID_ARGUMENT. On the run of infer_support.h.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "error_of.h"
#include "infer_support.h"
#include "tp/infer/infer.h"
#include "tp/infer/model.h"

namespace {

namespace fs = std::filesystem;
using namespace tp::test::infer;
using Kind = tp::infer::Error::Kind;

// The kind of what `body` throws as tp::infer::Error; Internal with a failed check when it throws nothing.
template <class Body>
Kind kind_of(Body&& body) {
  try {
    body();
  } catch (const tp::infer::Error& e) {
    INFO(e.what());
    return e.kind();
  }
  FAIL("no tp::infer::Error was thrown");
  return Kind::Internal;
}

// tp_infer_open's status for `export_file` with `plugin_dir`, the model closed when it opened.
tp_status open_status(const std::string& export_file, const std::string& plugin_dir) {
  tp_infer_model_t* model = nullptr;
  const tp_status status = tp_infer_open(export_file.c_str(), "cpu", plugin_dir.c_str(), &model);
  tp_infer_close(model);
  return status;
}

}  // namespace

TEST_CASE("tp::infer C API: a caller's bad input is TP_ERR_INVALID_ARGUMENT, the deployment's fault TP_ERR_CONFIG") {
  const Exported& run = exported();
  const fs::path corrupt = run.dir / "status_corrupt.png";
  std::ofstream(corrupt) << "not a png";
  const std::string missing = (run.dir / "status_missing.png").string();
  tp_infer_model_t* model = nullptr;
  REQUIRE(tp_infer_open(run.exported.c_str(), "cpu", tp::test::plugin_dir(), &model) == TP_OK);
  tp_infer_result_t* result = nullptr;
  const auto files_status = [&](const std::vector<const char*>& paths) {
    const tp_status status = tp_infer_run_files(model, paths.data(), static_cast<uint32_t>(paths.size()), 1, &result);
    tp_infer_result_free(result);
    return status;
  };
  // The uploads: a corrupt image, a missing file, with or without skip_bad_images.
  CHECK(files_status({corrupt.c_str(), run.files[0].c_str()}) == TP_ERR_INVALID_ARGUMENT);
  CHECK(files_status({missing.c_str()}) == TP_ERR_INVALID_ARGUMENT);
  REQUIRE(tp_infer_set_skip_bad_images(model, 1) == TP_OK);
  CHECK(files_status({corrupt.c_str()}) == TP_ERR_INVALID_ARGUMENT);
  CHECK(std::string(tp_infer_last_error()).find("none of the 1 images could be read") != std::string::npos);
  CHECK(files_status({missing.c_str()}) == TP_ERR_INVALID_ARGUMENT);
  // A tensor the model refuses: a wrong shape (its plugin's TP_ERR_INVALID_ARGUMENT), a wrong field.
  const std::vector<float> gray(32 * 32, 0.5F);
  const int64_t one_channel[] = {1, 1, 32, 32};
  CHECK(tp_infer_run_tensor(model, "image", gray.data(), one_channel, 4, 1, &result) == TP_ERR_INVALID_ARGUMENT);
  CHECK(std::string(tp_infer_last_error()).find("expected a floating [B, 3") != std::string::npos);
  CHECK(tp_infer_run_tensor(model, "pixels", gray.data(), one_channel, 4, 1, &result) == TP_ERR_INVALID_ARGUMENT);
  // The header's promise for a thread count.
  CHECK(tp_infer_set_threads(model, 1024) == TP_ERR_INVALID_ARGUMENT);
  CHECK(tp_infer_set_threads(model, 0x7FFFFFFFu) == TP_ERR_INVALID_ARGUMENT);
  CHECK(tp_infer_set_threads(model, 1023) == TP_OK);
  tp_infer_close(model);

  // The deployment: an export that is missing or no export, a plugin directory without the
  // model's plugin, a dataset plugin missing at run time.
  CHECK(open_status((run.dir / "status_missing.safetensors").string(), tp::test::plugin_dir()) == TP_ERR_CONFIG);
  CHECK(open_status((run.dir / "run.toml").string(), tp::test::plugin_dir()) == TP_ERR_CONFIG);
  const fs::path empty_dir = run.dir / "status_no_plugins";
  fs::create_directories(empty_dir);
  CHECK(open_status(run.exported.string(), empty_dir.string()) == TP_ERR_CONFIG);
  const fs::path model_only = run.dir / "status_model_only";
  fs::create_directories(model_only);
  fs::copy_file(fs::path(tp::test::plugin_dir()) / "vision_models.so", model_only / "vision_models.so",
                fs::copy_options::overwrite_existing);
  REQUIRE(tp_infer_open(run.exported.c_str(), "cpu", model_only.c_str(), &model) == TP_OK);
  CHECK(files_status({run.files[0].c_str()}) == TP_ERR_CONFIG);
  tp_infer_close(model);
  // A bad argument to open.
  CHECK(tp_infer_open(run.exported.c_str(), "tpu", tp::test::plugin_dir(), &model) == TP_ERR_INVALID_ARGUMENT);

  CHECK(std::string(tp_infer_status_name(TP_ERR_CONFIG)) == "TP_ERR_CONFIG");
  CHECK(std::string(tp_infer_status_name(TP_OK)) == "TP_OK");
  CHECK(std::string(tp_infer_status_name(TP_ERR_OUT_OF_RANGE)) == "TP_ERR_OUT_OF_RANGE");
  CHECK(std::string(tp_infer_status_name(99)) == "unknown status");
}

TEST_CASE("tp::infer: Error::kind() says whose fault a failure is") {
  const Exported& run = exported();
  const fs::path corrupt = run.dir / "kind_corrupt.png";
  std::ofstream(corrupt) << "not a png";
  tp::infer::Model model = tp::infer::Model::open(run.exported.string(), cpu_options());
  CHECK(kind_of([&] { model.run_files({corrupt.string()}); }) == Kind::BadInput);
  CHECK(kind_of([&] { model.run_encoded({{'n', 'o'}}); }) == Kind::BadInput);
  CHECK(kind_of([&] { model.run_tensors({{"image", {1, 1, 2, 2}, {0, 0, 0, 0}}}); }) == Kind::BadInput);
  CHECK(kind_of([&] { model.run_files({run.files[0]}, -1); }) == Kind::BadInput);
  CHECK(kind_of([&] { model.set_threads(5000); }) == Kind::BadInput);
  CHECK(kind_of([&] { (void)model.run_files({run.files[0]}).output("no_such_output"); }) == Kind::BadInput);
  CHECK(kind_of([&] { tp::infer::Model::open((run.dir / "kind_missing.safetensors").string(), cpu_options()); }) ==
        Kind::Setup);
  CHECK(kind_of([&] { tp::infer::Model::open(run.exported.string(), {.plugin_dirs = {(run.dir / "nowhere").string()}}); }) ==
        Kind::Setup);
  CHECK(kind_of([&] { tp::infer::Model::open(run.exported.string(), {.device = "cuda:99", .plugin_dirs = {"x"}}); }) ==
        Kind::Setup);
  // What callers wrote before kinds existed still compiles, and is the library's fault.
  CHECK(tp::infer::Error("tp::infer: x").kind() == Kind::Internal);
}

TEST_CASE("tp::infer C API: tp_infer_run_encoded refuses a size above the image limit before reading the buffer") {
  // Security trial F15: sizes[0] = UINT64_MAX gave "cannot create std::vector larger than
  // max_size()" (TP_ERR_IO), and 2^40 read that far past data[0] before any limit was checked.
  const Exported& run = exported();
  tp_infer_model_t* model = nullptr;
  REQUIRE(tp_infer_open(run.exported.c_str(), "cpu", tp::test::plugin_dir(), &model) == TP_OK);
  const uint8_t small[16] = {};
  const uint8_t* const images[] = {small, small};
  for (const uint64_t size : {UINT64_MAX, uint64_t{1} << 40}) {
    CAPTURE(size);
    const uint64_t sizes[] = {sizeof small, size};
    tp_infer_result_t* result = nullptr;
    CHECK(tp_infer_run_encoded(model, images, sizes, 2, 1, &result) == TP_ERR_INVALID_ARGUMENT);
    const std::string message = tp_infer_last_error();
    INFO(message);
    CHECK(message.find("tp_infer_run_encoded: sizes[1] is " + std::to_string(size) + " bytes") != std::string::npos);
    CHECK(message.find("1 GiB") != std::string::npos);
    CHECK(result == nullptr);
  }
  tp_infer_close(model);
}
