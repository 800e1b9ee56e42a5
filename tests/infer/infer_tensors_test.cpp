// Prepared tensors for a model of several input fields (serving trial F6): the C API's
// tp_infer_run_tensors (called from C, infer_c_calls.c) answers as tp_infer_run_tensor for one
// field and serves configs/multi_input.toml's two_stream (image + image2), which no C call could;
// a tensor under a name the model does not read, or twice under one name, is refused naming it in
// both APIs (it was dropped without a word).
#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "error_of.h"
#include "infer_support.h"

namespace {

using tp::test::error_of;
using tp::test::infer::cpu_options;
using tp::test::infer::exported;
using Kind = tp::infer::Error::Kind;

// The kind of what `body` throws as tp::infer::Error, Internal when it does not throw.
template <class Body>
Kind kind_thrown_by(Body&& body) {
  try {
    body();
  } catch (const tp::infer::Error& e) {
    return e.kind();
  }
  return Kind::Internal;
}

// Values in [0, 1) that differ per element, so that two fields swapped would answer otherwise.
std::vector<float> field_values(std::size_t count, float phase) {
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<float>((i * 37 + 11) % 101) / 101.F * phase;
  return values;
}

// configs/multi_input.toml's two_stream, trained for one short epoch and exported, once per process.
struct TwoStreamExport {
  std::filesystem::path exported;
  TwoStreamExport() {
    const std::filesystem::path dir = tp::test::fresh_dir("infer_two_stream"), out = dir / "out";
    exported = dir / "two_stream.safetensors";
    const auto train = tp::test::run_host(
        "train --config '" + std::string(tp::test::source_dir()) + "/configs/multi_input.toml' --output-dir '" + out.string() +
        "' --set train.epochs=1 --set data.train.size=64 --set data.train.val_size=16 --set train.batch_size=16 "
        "--set data.num_workers=0 --set run.threads=1");
    INFO(train.output);
    REQUIRE(train.exit_code == 0);
    export_last_checkpoint(out, exported);
  }
};

}  // namespace

TEST_CASE("tp::infer C API: tp_infer_run_tensors of one field answers as tp_infer_run_tensor; a field the model does not read is refused") {
  const auto& run = exported();
  const int64_t shape[] = {2, 3, 32, 32};
  const std::vector<float> pixels = field_values(2 * 3 * 32 * 32, 1.F);
  int same = 0, extra_is_null = 0;
  tp_status extra_status = TP_OK;
  char message[1024] = {};
  REQUIRE(infer_c_tensors(run.exported.c_str(), tp::test::plugin_dir(), "image", pixels.data(), shape, 4, "pixels",
                          &same, &extra_status, &extra_is_null, message, sizeof message) == TP_OK);
  CHECK(same == 1);
  CHECK(extra_status == TP_ERR_INVALID_ARGUMENT);
  CHECK(extra_is_null == 1);
  INFO(message);
  CHECK(std::string(message).find("input 1 is named 'pixels', which the model does not read (its inputs: 'image')") !=
        std::string::npos);
  // The same field twice: the second tensor would have been lost to the first.
  REQUIRE(infer_c_tensors(run.exported.c_str(), tp::test::plugin_dir(), "image", pixels.data(), shape, 4, "image",
                          &same, &extra_status, &extra_is_null, message, sizeof message) == TP_OK);
  CHECK(extra_status == TP_ERR_INVALID_ARGUMENT);
  CHECK(std::string(message).find("inputs 0 and 1 are both named 'image'") != std::string::npos);
}

TEST_CASE("tp::infer: run_tensors refuses a tensor the model does not read, naming it and the model's inputs") {
  tp::infer::Model model = tp::infer::Model::open(exported().exported.string(), cpu_options());
  const std::vector<float> pixels = field_values(3 * 32 * 32, 1.F);
  const tp::infer::Tensor image{"image", {1, 3, 32, 32}, pixels}, typo{"imgae", {1, 3, 32, 32}, pixels};
  CHECK(kind_thrown_by([&] { model.run_tensors({image, typo}); }) == Kind::BadInput);
  const std::string message = error_of([&] { model.run_tensors({image, typo}); });
  CHECK(message.find("'imgae', which the model does not read (its inputs: 'image')") != std::string::npos);
  CHECK(model.run_tensors({image}, 1).top.size() == 1);
}

TEST_CASE("tp::infer C API: tp_infer_run_tensors serves a model of two input fields (two_stream) as the C++ API does") {
  static const TwoStreamExport two;
  tp::infer::Model model = tp::infer::Model::open(two.exported.string(), cpu_options());
  const std::vector<int64_t> shape{2, 3, 32, 32};
  const std::vector<float> first = field_values(2 * 3 * 32 * 32, 1.F), second = field_values(2 * 3 * 32 * 32, 0.5F);
  const tp::infer::Batch expected = model.run_tensors({{"image", shape, first}, {"image2", shape, second}}, 3);

  tp_infer_model_t* c_model = nullptr;
  REQUIRE(tp_infer_open(two.exported.c_str(), "cpu", tp::test::plugin_dir(), &c_model) == TP_OK);
  const char* const names[] = {"image2", "image"}; // in any order: fields are named
  const float* const data[] = {second.data(), first.data()};
  const int64_t* const shapes[] = {shape.data(), shape.data()};
  const uint32_t ndims[] = {4, 4};
  tp_infer_result_t* result = nullptr;
  REQUIRE(tp_infer_run_tensors(c_model, names, data, shapes, ndims, 2, 3, &result) == TP_OK);
  REQUIRE(tp_infer_result_output_count(result) == expected.outputs.size());
  for (uint32_t i = 0; i < expected.outputs.size(); ++i) {
    const char* name = nullptr;
    const int64_t* out_shape = nullptr;
    uint32_t ndim = 0;
    const float* values = nullptr;
    REQUIRE(tp_infer_result_output(result, i, &name, &out_shape, &ndim, &values) == TP_OK);
    CHECK(name == expected.outputs[i].name);
    CHECK(std::vector<int64_t>(out_shape, out_shape + ndim) == expected.outputs[i].shape);
    CHECK(std::vector<float>(values, values + expected.outputs[i].values.size()) == expected.outputs[i].values);
  }
  CHECK(tp_infer_result_class_count(result, 1) == 3);
  tp_infer_result_free(result);

  // One field missing: the model's own refusal, the caller's fault; the result stays NULL.
  result = reinterpret_cast<tp_infer_result_t*>(&result);
  CHECK(tp_infer_run_tensors(c_model, names + 1, data + 1, shapes + 1, ndims + 1, 1, 3, &result) ==
        TP_ERR_INVALID_ARGUMENT);
  CHECK(result == nullptr);
  CHECK(std::string(tp_infer_last_error()).find("image2") != std::string::npos);
  // A NULL entry is named.
  const char* const null_name[] = {"image", nullptr};
  CHECK(tp_infer_run_tensors(c_model, null_name, data, shapes, ndims, 2, 3, &result) == TP_ERR_INVALID_ARGUMENT);
  CHECK(std::string(tp_infer_last_error()).find("`names[1]` is NULL") != std::string::npos);
  CHECK(tp_infer_run_tensors(c_model, names, data, shapes, ndims, 0, 3, &result) == TP_ERR_INVALID_ARGUMENT);
  tp_infer_close(c_model);
}
