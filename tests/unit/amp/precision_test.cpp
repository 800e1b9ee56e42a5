// parse_precision and check_precision_supported: config spelling and start-up device checks.
#include <ATen/Context.h>

#include "tp/framework/amp/precision.h"
#include "tp/framework/error.h"

#include <doctest/doctest.h>

#include <string>

namespace {

std::string config_error_of(const auto& fn) {
  try {
    fn();
  } catch (const tp::ConfigError& e) {
    CHECK(e.key_path() == "amp.precision");
    CHECK(e.exit_code() == tp::kExitConfig);
    return e.what();
  }
  FAIL("expected tp::ConfigError");
  return {};
}

}  // namespace

TEST_CASE("parse_precision accepts exactly fp32, fp16, bf16") {
  CHECK(tp::parse_precision("fp32") == tp::Precision::Fp32);
  CHECK(tp::parse_precision("fp16") == tp::Precision::Fp16);
  CHECK(tp::parse_precision("bf16") == tp::Precision::Bf16);
  for (const char* bad : {"FP16", "float16", "bfloat16", "", "fp8", "fp16 "}) {
    CAPTURE(bad);
    const std::string message = config_error_of([&] { tp::parse_precision(bad); });
    CHECK(message.find("\"fp32\", \"fp16\", \"bf16\"") != std::string::npos);
    CHECK(message.find(std::string("got \"") + bad + "\"") != std::string::npos);
  }
}

TEST_CASE("precision helpers: spelling, autocast dtype, grad scaler need") {
  for (auto p : {tp::Precision::Fp32, tp::Precision::Fp16, tp::Precision::Bf16}) {
    CHECK(tp::parse_precision(tp::to_string(p)) == p);
  }
  CHECK((tp::autocast_dtype(tp::Precision::Fp16) == c10::ScalarType::Half));
  CHECK((tp::autocast_dtype(tp::Precision::Bf16) == c10::ScalarType::BFloat16));
  CHECK((tp::autocast_dtype(tp::Precision::Fp32) == c10::ScalarType::Float));
  CHECK(tp::needs_grad_scaler(tp::Precision::Fp16));
  CHECK_FALSE(tp::needs_grad_scaler(tp::Precision::Bf16));
  CHECK_FALSE(tp::needs_grad_scaler(tp::Precision::Fp32));
}

TEST_CASE("check_precision_supported: every precision on CPU, fp32 anywhere") {
  for (auto p : {tp::Precision::Fp32, tp::Precision::Fp16, tp::Precision::Bf16}) {
    CHECK_NOTHROW(tp::check_precision_supported(p, c10::Device(c10::kCPU)));
  }
  CHECK_NOTHROW(tp::check_precision_supported(tp::Precision::Fp32, c10::Device(c10::kMeta)));
  CHECK_NOTHROW(tp::check_precision_supported(tp::Precision::Fp32, c10::Device(c10::kCUDA, 0)));
}

TEST_CASE("check_precision_supported: refuses device types without torchhost autocast") {
  const std::string message =
      config_error_of([] { tp::check_precision_supported(tp::Precision::Bf16, c10::Device(c10::kMeta)); });
  CHECK(message.find("cpu and cuda") != std::string::npos);
  CHECK(message.find("meta") != std::string::npos);
}

TEST_CASE("check_precision_supported: CUDA precisions need CUDA") {
  if (at::globalContext().hasCUDA()) {
    // A GPU machine: fp16 runs on every CUDA GPU LibTorch supports; bf16 depends on the GPU and is
    // checked against the compute capability (exercised on the GPU machine, see the report).
    CHECK_NOTHROW(tp::check_precision_supported(tp::Precision::Fp16, c10::Device(c10::kCUDA, 0)));
    const std::string message =
        config_error_of([] { tp::check_precision_supported(tp::Precision::Fp16, c10::Device(c10::kCUDA, 99)); });
    CHECK(message.find("does not exist") != std::string::npos);
  } else {
    for (auto p : {tp::Precision::Fp16, tp::Precision::Bf16}) {
      const std::string message = config_error_of([&] { tp::check_precision_supported(p, c10::Device(c10::kCUDA, 0)); });
      CHECK(message.find("CUDA is not available") != std::string::npos);
      CHECK(message.find("cuda:0") != std::string::npos);
    }
  }
}
