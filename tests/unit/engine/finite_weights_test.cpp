// Non-finite weights (finite_weights.h): found on the device whatever their dtype, the first step
// whose update made them so remembered, and an average gated by it never takes them in
// (weight_average.h).
#include <ATen/ATen.h>

#include <limits>
#include <vector>

#include "engine/training/finite_weights.h"
#include "engine/training/weight_average.h"

#include <doctest/doctest.h>

namespace {

std::vector<tp::StateTensor> state_of(std::vector<at::Tensor> tensors) {
  std::vector<tp::StateTensor> state;
  for (std::size_t i = 0; i < tensors.size(); ++i) state.push_back({"t" + std::to_string(i), tensors[i], false});
  return state;
}

}  // namespace

TEST_CASE("all_finite / exactly_finite: inf or NaN in any floating-point tensor, of any dtype; integers are finite") {
  const double inf = std::numeric_limits<double>::infinity();
  const auto state = state_of({at::full({1}, 3e38, at::kFloat), at::ones({2}, at::kHalf), at::arange(4), at::empty({0})});
  CHECK(tp::all_finite(state).item<bool>()); // 3e38 is finite, and its L2 norm would not be
  CHECK(tp::exactly_finite(state));
  // Finite weights whose float32 sum overflows: flagged by the fast CPU check, cleared by the exact one.
  const auto huge = state_of({at::full({3}, 3e38, at::kFloat)});
  CHECK_FALSE(tp::all_finite(huge).item<bool>());
  CHECK(tp::exactly_finite(huge));
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    CAPTURE(dtype);
    for (double bad : {inf, -inf, std::numeric_limits<double>::quiet_NaN()}) {
      at::Tensor poisoned = at::zeros({5}, dtype);
      poisoned[3] = bad;
      CHECK_FALSE(tp::all_finite(state_of({at::ones({2}), poisoned})).item<bool>());
      CHECK_FALSE(tp::exactly_finite(state_of({at::ones({2}), poisoned})));
    }
  }
}

TEST_CASE("FiniteWeightsWatch keeps the first step whose update left the weights non-finite") {
  at::Tensor w = at::ones({4});
  const auto state = state_of({w});
  tp::FiniteWeightsWatch watch;
  CHECK(watch.first_non_finite_step() == -1);
  watch.observe(state, 1);
  watch.observe(state, 2);
  CHECK(watch.finite().item<bool>());
  CHECK(watch.first_non_finite_step() == -1);
  w[1] = std::numeric_limits<float>::infinity();
  watch.observe(state, 3);
  w[2] = std::numeric_limits<float>::quiet_NaN();
  watch.observe(state, 4);
  CHECK_FALSE(watch.finite().item<bool>());
  CHECK(watch.first_non_finite_step() == 3);
}

TEST_CASE("an average gated by the watch never takes non-finite weights, and is unchanged bit for bit") {
  at::Tensor w = at::full({3}, 2.0);
  const auto state = state_of({w, at::arange(3)});
  tp::WeightAverage ema("ema", tp::AverageRule{}, state, c10::Device(c10::kCPU));
  tp::FiniteWeightsWatch watch;
  watch.observe(state, 1);
  ema.update(state, watch.finite()); // the first update copies
  w.fill_(4.0);
  watch.observe(state, 2);
  ema.update(state, watch.finite());
  const at::Tensor before = ema.state()[0].tensor.clone();
  CHECK(before.isfinite().all().item<bool>());
  CHECK(before[0].item<double>() > 2.0);
  w[0] = std::numeric_limits<float>::quiet_NaN();
  watch.observe(state, 3);
  ema.update(state, watch.finite());
  CHECK(at::equal(ema.state()[0].tensor, before));
  CHECK(ema.updates() == 3);
  // Ungated, as before the watch, the NaN goes in.
  ema.update(state);
  CHECK_FALSE(ema.state()[0].tensor.isfinite().all().item<bool>());
}
