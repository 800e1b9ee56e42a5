// AutocastGuard: what it changes, that it restores exactly, nesting, and failure without side effects.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include "tp/framework/amp/autocast_guard.h"
#include "tp/framework/error.h"

#include <doctest/doctest.h>

#include <stdexcept>

namespace {

constexpr auto kCpu = c10::DeviceType::CPU;

struct CpuAutocastState {
  bool enabled;
  c10::ScalarType dtype;
  bool operator==(const CpuAutocastState&) const = default;
};

CpuAutocastState cpu_state() {
  return {at::autocast::is_autocast_enabled(kCpu), at::autocast::get_autocast_dtype(kCpu)};
}

// The nesting counter is internal; probing it (+1 then -1) shows whether guards left it balanced.
int nesting_depth() {
  const int depth = at::autocast::increment_nesting() - 1;
  at::autocast::decrement_nesting();
  return depth;
}

c10::ScalarType matmul_dtype() {
  const at::Tensor a = at::ones({4, 4});
  return at::matmul(a, a).scalar_type();
}

}  // namespace

TEST_CASE("AutocastGuard bf16 on CPU: matmul runs in bf16 inside, float32 after; state restored") {
  const CpuAutocastState before = cpu_state();
  REQUIRE_FALSE(before.enabled);
  {
    tp::AutocastGuard guard(kCpu, tp::Precision::Bf16);
    CHECK(guard.active());
    CHECK(cpu_state() == CpuAutocastState{true, c10::ScalarType::BFloat16});
    CHECK(nesting_depth() == 1);
    CHECK((matmul_dtype() == c10::ScalarType::BFloat16));
    // Ops on the fp32 list still run in fp32 under autocast.
    CHECK((at::mse_loss(at::ones({2}), at::zeros({2})).scalar_type() == c10::ScalarType::Float));
  }
  CHECK(cpu_state() == before);
  CHECK(nesting_depth() == 0);
  CHECK((matmul_dtype() == c10::ScalarType::Float));
}

TEST_CASE("AutocastGuard fp16 on CPU exists in LibTorch 2.13") {
  tp::AutocastGuard guard(kCpu, tp::Precision::Fp16);
  CHECK((matmul_dtype() == c10::ScalarType::Half));
}

TEST_CASE("AutocastGuard nests: inner dtype wins, each exit restores its own entry state") {
  const CpuAutocastState before = cpu_state();
  {
    tp::AutocastGuard outer(kCpu, tp::Precision::Bf16);
    {
      tp::AutocastGuard inner(kCpu, c10::ScalarType::Half);
      CHECK(cpu_state() == CpuAutocastState{true, c10::ScalarType::Half});
      CHECK(nesting_depth() == 2);
      CHECK((matmul_dtype() == c10::ScalarType::Half));
    }
    CHECK(cpu_state() == CpuAutocastState{true, c10::ScalarType::BFloat16});
    CHECK(nesting_depth() == 1);
    CHECK((matmul_dtype() == c10::ScalarType::BFloat16));
  }
  CHECK(cpu_state() == before);
  CHECK(nesting_depth() == 0);
}

TEST_CASE("AutocastGuard restores a non-default previous dtype") {
  const CpuAutocastState before = cpu_state();
  at::autocast::set_autocast_dtype(kCpu, c10::ScalarType::Half);
  {
    tp::AutocastGuard guard(kCpu, tp::Precision::Bf16);
    CHECK(cpu_state() == CpuAutocastState{true, c10::ScalarType::BFloat16});
  }
  CHECK(cpu_state() == CpuAutocastState{false, c10::ScalarType::Half});
  at::autocast::set_autocast_dtype(kCpu, before.dtype);
}

TEST_CASE("AutocastGuard for fp32 does nothing, also inside an enabled region") {
  const CpuAutocastState before = cpu_state();
  {
    tp::AutocastGuard off(kCpu, tp::Precision::Fp32);
    CHECK_FALSE(off.active());
    CHECK(cpu_state() == before);
    CHECK(nesting_depth() == 0);
    CHECK((matmul_dtype() == c10::ScalarType::Float));
  }
  tp::AutocastGuard on(kCpu, tp::Precision::Bf16);
  {
    tp::AutocastGuard off(kCpu, tp::Precision::Fp32);
    CHECK(cpu_state() == CpuAutocastState{true, c10::ScalarType::BFloat16});
    CHECK(nesting_depth() == 1);
  }
  CHECK(cpu_state() == CpuAutocastState{true, c10::ScalarType::BFloat16});
}

TEST_CASE("AutocastGuard with an unsupported dtype throws and leaves autocast as it was") {
  // LibTorch 2.13 itself accepts set_autocast_dtype(cpu, float64); the guard must refuse first.
  const CpuAutocastState before = cpu_state();
  for (auto dtype : {c10::ScalarType::Double, c10::ScalarType::Float, c10::ScalarType::Int}) {
    CAPTURE(c10::toString(dtype));
    CHECK_THROWS_WITH_AS(tp::AutocastGuard(kCpu, dtype), doctest::Contains("float16 or bfloat16"), tp::Error);
    CHECK(cpu_state() == before);
    CHECK(nesting_depth() == 0);
  }
  {
    tp::AutocastGuard outer(kCpu, tp::Precision::Fp16);
    CHECK_THROWS_AS(tp::AutocastGuard(kCpu, c10::ScalarType::Double), tp::Error);
    CHECK(cpu_state() == CpuAutocastState{true, c10::ScalarType::Half});
    CHECK(nesting_depth() == 1);
  }
  CHECK(cpu_state() == before);
}

TEST_CASE("AutocastGuard restores state when the region throws") {
  const CpuAutocastState before = cpu_state();
  CHECK_THROWS_AS(
      [] {
        tp::AutocastGuard guard(kCpu, tp::Precision::Bf16);
        throw std::runtime_error("forward failed");
      }(),
      std::runtime_error);
  CHECK(cpu_state() == before);
  CHECK(nesting_depth() == 0);
}

TEST_CASE("AutocastGuard for CUDA touches only the CUDA switch") {
  const CpuAutocastState cpu_before = cpu_state();
  const bool cuda_before = at::autocast::is_autocast_enabled(c10::DeviceType::CUDA);
  const auto cuda_dtype_before = at::autocast::get_autocast_dtype(c10::DeviceType::CUDA);
  {
    tp::AutocastGuard guard(c10::DeviceType::CUDA, tp::Precision::Bf16);
    CHECK(at::autocast::is_autocast_enabled(c10::DeviceType::CUDA));
    CHECK((at::autocast::get_autocast_dtype(c10::DeviceType::CUDA) == c10::ScalarType::BFloat16));
    CHECK(cpu_state() == cpu_before);
    CHECK((matmul_dtype() == c10::ScalarType::Float));  // CPU tensors are not cast by CUDA autocast
  }
  CHECK(at::autocast::is_autocast_enabled(c10::DeviceType::CUDA) == cuda_before);
  CHECK((at::autocast::get_autocast_dtype(c10::DeviceType::CUDA) == cuda_dtype_before));
}
