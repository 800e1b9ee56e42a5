// Whose fault an exception under the inference library is (framework/infer/src/failure.h),
// compiled into this test from the library's sources: the allocation failures that reach it from
// LibTorch and from plugins are OutOfMemory (serving trial F2: LibTorch's allocator's failure was
// TP_ERR_IO), a plugin's refusal of its input is what the call says, the deployment's is Setup.
#include <c10/util/Exception.h>

#include <new>
#include <string>

#include <doctest/doctest.h>

#include "failure.h"
#include "tp/framework/error.h"
#include "tp/infer/model.h"
#include "tp/status.h"

namespace {

using tp::infer::detail::FailureKinds;
using Kind = tp::infer::Error::Kind;

// The Error that rethrow_as_error makes of `thrown` under `kinds`.
template <class Thrown>
tp::infer::Error as_error(const Thrown& thrown, FailureKinds kinds = {}) {
  try {
    try {
      throw thrown;
    } catch (...) {
      tp::infer::detail::rethrow_as_error(kinds);
    }
  } catch (const tp::infer::Error& e) {
    return e;
  }
  return tp::infer::Error("not thrown");
}

const FailureKinds kTensors{Kind::Internal, Kind::BadInput};

}  // namespace

TEST_CASE("rethrow_as_error: LibTorch's and a plugin's allocation failures are OutOfMemory") {
  CHECK(as_error(std::bad_alloc()).kind() == Kind::OutOfMemory);
  CHECK(as_error(c10::OutOfMemoryError({"f", "file.cpp", 1}, "CUDA out of memory. Tried to allocate 2 GiB")).kind() ==
        Kind::OutOfMemory);
  // The CPU allocator's failure is a plain c10::Error (security trial F11's text).
  const c10::Error cpu({"alloc_cpu", "alloc_cpu.cpp", 127},
                       "DefaultCPUAllocator: not enough memory: you tried to allocate 39321600000 bytes.");
  const tp::infer::Error from_cpu = as_error(cpu);
  CHECK(from_cpu.kind() == Kind::OutOfMemory);
  CHECK(std::string(from_cpu.what()).starts_with("tp::infer: "));
  // A plugin's TP_GUARD reports it as TP_ERR_INTERNAL, its own failure as TP_ERR_OUT_OF_MEMORY.
  CHECK(as_error(tp::PluginError("org.torchhost.small_cnn", "forward",
                                 "failed in forward with TP_ERR_INTERNAL: [enforce fail at alloc_cpu.cpp:127] "
                                 "data. DefaultCPUAllocator: not enough memory: you tried to allocate 8 bytes.",
                                 TP_ERR_INTERNAL))
            .kind() == Kind::OutOfMemory);
  CHECK(as_error(tp::PluginError("org.torchhost.small_cnn", "forward", "x", TP_ERR_OUT_OF_MEMORY)).kind() ==
        Kind::OutOfMemory);
}

TEST_CASE("rethrow_as_error: a plugin's refusal of its input is the call's to judge; the deployment's faults are Setup") {
  const tp::PluginError refused("org.torchhost.small_cnn", "forward", "expected a floating [B, 3, H, W] image",
                                TP_ERR_INVALID_ARGUMENT);
  CHECK(as_error(refused, kTensors).kind() == Kind::BadInput);
  CHECK(as_error(refused).kind() == Kind::Internal);
  CHECK(as_error(tp::PluginError("org.torchhost.small_cnn", "forward", "x", TP_ERR_IO), kTensors).kind() ==
        Kind::Internal);
  CHECK(as_error(tp::PluginError("org.torchhost.image_folder", "create", "root missing", TP_ERR_IO)).kind() ==
        Kind::Setup);
  CHECK(as_error(tp::PluginLoadError("cannot load plugin x.so")).kind() == Kind::Setup);
  CHECK(as_error(tp::ConfigError("model", "unknown key")).kind() == Kind::Setup);
  CHECK(as_error(std::runtime_error("something"), {Kind::Setup, Kind::Setup}).kind() == Kind::Setup);
  CHECK(as_error(std::runtime_error("something")).kind() == Kind::Internal);
  const tp::infer::Error own("tp::infer: given", Kind::BadInput);
  CHECK(as_error(own).kind() == Kind::BadInput);
  CHECK(std::string(as_error(own).what()) == "tp::infer: given");
}
