// The largest image a call decodes (serving trial F10): OpenOptions::max_image_pixels and C's
// tp_infer_set_max_image_pixels lower the export's limit (its training table's max_image_pixels,
// 179 million pixels), and the refusal names the library's option, not the training key the
// caller cannot reach. The export's images are 32 x 32 = 1024 pixels.
#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "error_of.h"
#include "infer_support.h"

TEST_CASE("tp::infer: max_image_pixels lowers the export's decode limit; the refusal names the library's option") {
  const auto& run = tp::test::infer::exported();
  tp::infer::OpenOptions options = tp::test::infer::cpu_options();
  options.max_image_pixels = 1000;
  tp::infer::Model model = tp::infer::Model::open(run.exported.string(), options);
  try {
    model.run_files({run.files[0]}, 1);
    FAIL("a 1024-pixel image passed a 1000-pixel limit");
  } catch (const tp::infer::Error& e) {
    INFO(e.what());
    CHECK(e.kind() == tp::infer::Error::Kind::BadInput);
    const std::string message = e.what();
    CHECK(message.find("1024 pixels, more than the pixel limit 1000") != std::string::npos);
    CHECK(message.find("OpenOptions::max_image_pixels (C: tp_infer_set_max_image_pixels)") != std::string::npos);
    CHECK(message.find("raise max_image_pixels") == std::string::npos);
  }
  // At the image's size it decodes; 0 is the export's own limit; above it, the export's stays.
  model.set_max_image_pixels(1024);
  CHECK(model.run_files({run.files[0]}, 1).top.size() == 1);
  model.set_max_image_pixels(0);
  CHECK(model.run_files({run.files[0]}, 1).top.size() == 1);
  CHECK(tp::test::error_of([&] { model.set_max_image_pixels(-1); }).find("max_image_pixels is -1") !=
        std::string::npos);
  options.max_image_pixels = -1;
  CHECK(tp::test::error_of([&] { tp::infer::Model::open(run.exported.string(), options); })
            .find("max_image_pixels is -1") != std::string::npos);
}

TEST_CASE("tp::infer C API: tp_infer_set_max_image_pixels bounds the images a call decodes") {
  const auto& run = tp::test::infer::exported();
  tp_infer_model_t* model = nullptr;
  REQUIRE(tp_infer_open(run.exported.c_str(), "cpu", tp::test::plugin_dir(), &model) == TP_OK);
  const char* const paths[] = {run.files[0].c_str()};
  tp_infer_result_t* result = nullptr;
  REQUIRE(tp_infer_set_max_image_pixels(model, 1023) == TP_OK);
  CHECK(tp_infer_run_files(model, paths, 1, 1, &result) == TP_ERR_INVALID_ARGUMENT);
  CHECK(result == nullptr);
  CHECK(std::string(tp_infer_last_error()).find("tp_infer_set_max_image_pixels") != std::string::npos);
  // Far above the export's 178956970: the export's limit stays, and the image decodes.
  REQUIRE(tp_infer_set_max_image_pixels(model, UINT64_C(1) << 62) == TP_OK);
  CHECK(tp_infer_run_files(model, paths, 1, 1, &result) == TP_OK);
  tp_infer_result_free(result);
  CHECK(tp_infer_set_max_image_pixels(model, UINT64_MAX) == TP_ERR_INVALID_ARGUMENT);
  CHECK(tp_infer_set_max_image_pixels(nullptr, 0) == TP_ERR_INVALID_ARGUMENT);
  tp_infer_close(model);
}
