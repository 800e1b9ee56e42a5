// The message of a component that fails on a batch (batch_error.h): the fields it received with
// dtype and shape, the phase, LibTorch's message without its C++ backtrace; and what passes
// through unchanged (out of memory, the host's own errors).
#include <doctest/doctest.h>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <string>

#include "engine/training/batch_error.h"
#include "tp/framework/data/dtype_name.h"
#include "tp/framework/error.h"

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const tp::NamedTensors kInputs{{"image", at::zeros({64, 3, 32, 32})}, {"label", at::zeros({64}, at::kFloat)}};
const tp::NamedTensors kOutputs{{"logits", at::zeros({64, 10})}};

tp::BatchFailure loss_failure() {
  return {"loss", "org.torchhost.cross_entropy", "forward", "training step 3 (epoch 1, batch 3)", "[loss]",
          {{"outputs", &kOutputs}, {"targets", &kInputs}}};
}

// The exception rethrow_batch_error throws for `error` (thrown first, so it is the current one).
template <typename E>
std::exception_ptr annotated(const E& error, const tp::BatchFailure& where) {
  try {
    try {
      throw error;
    } catch (...) {
      tp::rethrow_batch_error(std::current_exception(), where);
    }
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

}  // namespace

TEST_CASE("dtypes print as PyTorch names them, fields as name dtype[shape]") {
  CHECK(tp::dtype_name(at::kFloat) == "float32");
  CHECK(tp::dtype_name(at::kLong) == "int64");
  CHECK(tp::dtype_name(at::kBFloat16) == "bfloat16");
  CHECK(tp::dtype_name(at::kBool) == "bool");
  CHECK(tp::describe_fields(kInputs) == "image float32[64, 3, 32, 32], label float32[64]");
  CHECK(tp::describe_fields({{"id", at::zeros({}, at::kLong)}}) == "id int64[]");
  CHECK(tp::describe_fields({}) == "(none)");
}

TEST_CASE("LibTorch's C++ backtrace is cut from a message, the message kept") {
  const std::string raw =
      "mat1 and mat2 shapes cannot be multiplied (64x3 and 2x64)\n"
      "Exception raised from meta at /pytorch/aten/src/ATen/native/LinearAlgebra.cpp:192 (most recent call first):\n"
      "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f in libc10.so)\n"
      "frame #1: at::meta::structured_mm::meta(...) + 0x1ec (0x7f in libtorch_cpu.so)\n";
  CHECK(tp::without_backtrace(raw) == "mat1 and mat2 shapes cannot be multiplied (64x3 and 2x64)");
  CHECK(tp::without_backtrace("line one\n  frame #3: x\nline two\n") == "line one\nline two");
  CHECK(tp::without_backtrace("no backtrace here") == "no backtrace here");
}

TEST_CASE("a plugin's error keeps its type, component and status, and gains the phase and the fields") {
  const tp::PluginError original("org.torchhost.cross_entropy", "forward",
                                 "plugin component 'org.torchhost.cross_entropy' (basic_losses.so) failed in forward "
                                 "with TP_ERR_INVALID_ARGUMENT: target 'label' float32[64]: class indices need an "
                                 "integer dtype (int64).",
                                 2);
  const std::exception_ptr error = annotated(original, loss_failure());
  try {
    std::rethrow_exception(error);
  } catch (const tp::PluginError& e) {
    const std::string text = e.what();
    CHECK(e.component_id() == "org.torchhost.cross_entropy");
    CHECK(e.function() == "forward");
    CHECK(e.status() == 2);
    CHECK(e.exit_code() == tp::kExitRuntime);
    CHECK(contains(text, "class indices need an integer dtype (int64). In the loss's forward of training step 3 "
                         "(epoch 1, batch 3), which received outputs: logits float32[64, 10]; targets: image "
                         "float32[64, 3, 32, 32], label float32[64]. Check that these names, dtypes and shapes are "
                         "what the loss expects: the keys of [loss] name the fields it reads"));
    CHECK_FALSE(contains(text, ".."));
  }
}

TEST_CASE("a c10::Error from the host side of a call becomes a PluginError of the component, without backtrace") {
  std::exception_ptr error;
  try {
    (void)at::mm(at::zeros({64, 3}), at::zeros({2, 64}));
  } catch (const c10::Error& e) {
    error = annotated(e, {"model", "org.torchhost.mlp", "forward", "the evaluation 'val' (batch 2)", "[model]",
                          {{"inputs", &kInputs}}});
  }
  REQUIRE(error);
  try {
    std::rethrow_exception(error);
  } catch (const tp::PluginError& e) {
    const std::string text = e.what();
    CHECK(e.component_id() == "org.torchhost.mlp");
    CHECK(contains(text, "the model component 'org.torchhost.mlp' failed in forward: "));
    CHECK(contains(text, "cannot be multiplied (64x3 and 2x64)"));
    CHECK(contains(text, "In the model's forward of the evaluation 'val' (batch 2), which received inputs: image "
                         "float32[64, 3, 32, 32], label float32[64]."));
    CHECK_FALSE(contains(text, "Exception raised from"));
    CHECK_FALSE(contains(text, "frame #"));
  }
}

TEST_CASE("out of memory and the host's own errors pass through unchanged") {
  const tp::PluginError oom("org.torchhost.mlp", "forward", "out of memory", 5);  // TP_ERR_OUT_OF_MEMORY
  try {
    std::rethrow_exception(annotated(oom, loss_failure()));
  } catch (const tp::PluginError& e) {
    CHECK(std::string(e.what()) == "out of memory");
  }
  const tp::ConfigError config("loss.target", "loss.target: no such field");
  CHECK_THROWS_AS(std::rethrow_exception(annotated(config, loss_failure())), tp::ConfigError);
  try {
    std::rethrow_exception(annotated(config, loss_failure()));
  } catch (const tp::ConfigError& e) {
    CHECK(std::string(e.what()) == "loss.target: no such field");
  }
}

TEST_CASE("with_batch_context returns the call's value and builds no description when nothing throws") {
  int described = 0;
  const int value = tp::with_batch_context([] { return 7; }, [&] {
    ++described;
    return loss_failure();
  });
  CHECK(value == 7);
  CHECK(described == 0);
  CHECK_THROWS_AS(tp::with_batch_context([]() -> int { throw std::runtime_error("bad"); }, [&] {
    ++described;
    return loss_failure();
  }),
                  tp::PluginError);
  CHECK(described == 1);
}
