// GradScaler semantics on CPU: passthrough when disabled, unscale-then-clip ordering, skipped
// steps, growth/backoff, misuse errors, and the checkpoint state round trip.
#include <ATen/ATen.h>
#include <torch/optim/sgd.h>

#include "amp_test_helpers.h"
#include "tp/framework/amp/grad_scaler.h"
#include "tp/framework/error.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace {

std::vector<at::Tensor> make_params() {
  // Deterministic, not random: the tests compare exact values.
  auto ramp = [](int64_t n, double step) { return at::sin(at::arange(n, at::kFloat) * step) * 0.3; };
  return {ramp(16 * 8, 0.37).reshape({16, 8}).requires_grad_(), ramp(16, 0.11).requires_grad_(),
          ramp(4 * 16, 0.23).reshape({4, 16}).requires_grad_(), ramp(4, 0.5).requires_grad_()};
}

at::Tensor batch_input() { return at::cos(at::arange(4 * 8, at::kFloat) * 0.7).reshape({4, 8}); }
at::Tensor batch_target() { return at::sin(at::arange(4 * 4, at::kFloat) * 0.9).reshape({4, 4}); }

at::Tensor loss_of(const std::vector<at::Tensor>& params) {
  return at::mse_loss(tp::test::mlp_forward(params, batch_input()), batch_target());
}

std::vector<at::Tensor> grads_of(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(p.grad().clone());
  return out;
}

std::vector<at::Tensor> values_of(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone());
  return out;
}

bool all_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!at::equal(a[i], b[i])) return false;
  }
  return true;
}

torch::optim::SGDOptions sgd_options() { return torch::optim::SGDOptions(0.1).momentum(0.9); }

// One scaled backward of the standard loss, times `factor` (inf forces an overflow).
void scaled_backward(tp::GradScaler& scaler, const std::vector<at::Tensor>& params, double factor = 1.0) {
  scaler.scale(loss_of(params) * factor).backward();
}

}  // namespace

TEST_CASE("GradScaler: defaults are torch.amp.GradScaler's") {
  const tp::GradScalerOptions o;
  CHECK(o.init_scale() == 65536.0);
  CHECK(o.growth_factor() == 2.0);
  CHECK(o.backoff_factor() == 0.5);
  CHECK(o.growth_interval() == 2000);
  CHECK(o.enabled());
  tp::GradScaler scaler;
  CHECK(scaler.get_scale() == 65536.0);  // before the first scale(): init_scale
  CHECK(scaler.get_growth_tracker() == 0);
}

TEST_CASE("GradScaler: options are validated when enabled") {
  CHECK_THROWS_WITH_AS(tp::GradScaler(tp::GradScalerOptions().growth_factor(1.0)), doctest::Contains("growth_factor"),
                       tp::Error);
  CHECK_THROWS_WITH_AS(tp::GradScaler(tp::GradScalerOptions().backoff_factor(1.0)), doctest::Contains("backoff_factor"),
                       tp::Error);
  CHECK_THROWS_AS(tp::GradScaler(tp::GradScalerOptions().backoff_factor(0.0)), tp::Error);
  CHECK_THROWS_AS(tp::GradScaler(tp::GradScalerOptions().growth_interval(0)), tp::Error);
  CHECK_THROWS_AS(tp::GradScaler(tp::GradScalerOptions().init_scale(0.0)), tp::Error);
  CHECK_THROWS_AS(tp::GradScaler(tp::GradScalerOptions().init_scale(std::numeric_limits<double>::infinity())),
                  tp::Error);
  CHECK_NOTHROW(tp::GradScaler(tp::GradScalerOptions().growth_factor(0.5).enabled(false)));
}

TEST_CASE("GradScaler disabled: a passthrough") {
  auto params = make_params();
  torch::optim::SGD sgd(params, sgd_options());
  tp::GradScaler scaler(tp::GradScalerOptions().enabled(false));
  const at::Tensor loss = loss_of(params);
  const at::Tensor scaled = scaler.scale(loss);
  CHECK(scaled.is_same(loss));
  scaled.backward();
  const auto grads = grads_of(params);
  scaler.unscale(sgd);  // no-op
  CHECK(all_equal(grads_of(params), grads));
  const auto before = values_of(params);
  CHECK(scaler.step(sgd));
  CHECK_FALSE(all_equal(values_of(params), before));
  scaler.update();
  CHECK(scaler.get_scale() == 1.0);
  CHECK(scaler.get_growth_tracker() == 0);
  CHECK_FALSE(scaler.state().enabled);
}

TEST_CASE("GradScaler: unscale then clip, then step uses the clipped, unscaled grads") {
  // Reference: plain fp32 gradients of the same loss.
  auto ref_params = make_params();
  loss_of(ref_params).backward();
  const auto ref_grads = grads_of(ref_params);

  auto params = make_params();
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.1));
  tp::GradScaler scaler(tp::GradScalerOptions().init_scale(1024.0));
  scaled_backward(scaler, params);
  for (std::size_t i = 0; i < params.size(); ++i) {
    CHECK(at::equal(params[i].grad(), ref_grads[i] * 1024.0));  // powers of two scale exactly
  }

  scaler.unscale(sgd);
  CHECK(all_equal(grads_of(params), ref_grads));

  const double total = tp::test::clip_grad_norm(params, 0.05).item<double>();
  REQUIRE(total > 0.05);  // the clip is active
  const auto clipped = grads_of(params);
  CHECK_FALSE(all_equal(clipped, ref_grads));

  CHECK_THROWS_WITH_AS(scaler.unscale(sgd), doctest::Contains("unscale() has already been called"), tp::Error);
  CHECK(all_equal(grads_of(params), clipped));  // the failed call changed nothing

  const auto before = values_of(params);
  CHECK(scaler.step(sgd));  // must not unscale a second time
  for (std::size_t i = 0; i < params.size(); ++i) {
    CHECK(at::allclose(params[i].detach(), before[i] - 0.1 * clipped[i], 0.0, 0.0));
  }
  CHECK_THROWS_WITH_AS(scaler.unscale(sgd), doctest::Contains("after step()"), tp::Error);
  CHECK_THROWS_WITH_AS(scaler.step(sgd), doctest::Contains("step() has already been called"), tp::Error);
  scaler.update();

  // Next step: unscale is allowed again.
  sgd.zero_grad();
  scaled_backward(scaler, params);
  CHECK_NOTHROW(scaler.unscale(sgd));
}

TEST_CASE("GradScaler: inf or NaN gradients skip the step and back off; finite steps grow the scale") {
  auto params = make_params();
  torch::optim::SGD sgd(params, sgd_options());
  tp::GradScaler scaler(tp::GradScalerOptions().init_scale(256.0).growth_interval(2));

  for (double bad : {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(bad);
    sgd.zero_grad();
    const double scale_before = scaler.get_scale();
    const auto before = values_of(params);
    scaled_backward(scaler, params, bad);
    CHECK_FALSE(scaler.step(sgd));
    CHECK(all_equal(values_of(params), before));
    scaler.update();
    CHECK(scaler.get_scale() == scale_before * 0.5);
    CHECK(scaler.get_growth_tracker() == 0);
  }
  CHECK(scaler.get_scale() == 64.0);

  for (int i = 0; i < 2; ++i) {
    sgd.zero_grad();
    scaled_backward(scaler, params);
    CHECK(scaler.step(sgd));
    scaler.update();
  }
  CHECK(scaler.get_scale() == 128.0);  // grew after growth_interval = 2 finite steps
  CHECK(scaler.get_growth_tracker() == 0);

  scaler.update(4096.0);  // the manual override PyTorch offers as update(new_scale)
  CHECK(scaler.get_scale() == 4096.0);
}

TEST_CASE("GradScaler: one overflowing optimizer backs off the shared scale") {
  auto params = make_params();
  std::vector<at::Tensor> first(params.begin(), params.begin() + 2);
  std::vector<at::Tensor> second(params.begin() + 2, params.end());
  torch::optim::SGD sgd1(first, sgd_options());
  torch::optim::SGD sgd2(second, sgd_options());
  tp::GradScaler scaler(tp::GradScalerOptions().init_scale(1024.0));
  scaled_backward(scaler, params);
  {
    at::NoGradGuard no_grad;
    params[0].mutable_grad()[0][0] = std::numeric_limits<float>::infinity();
  }
  CHECK_FALSE(scaler.step(sgd1));
  CHECK(scaler.step(sgd2));
  scaler.update();
  CHECK(scaler.get_scale() == 512.0);
}

TEST_CASE("GradScaler: misuse errors") {
  auto params = make_params();
  torch::optim::SGD sgd(params, sgd_options());
  tp::GradScaler scaler;
  loss_of(params).backward();
  CHECK_THROWS_WITH_AS(scaler.unscale(sgd), doctest::Contains("before any scale()"), tp::Error);
  CHECK_THROWS_AS(scaler.step(sgd), tp::Error);
  CHECK_THROWS_AS(scaler.update(), tp::Error);

  sgd.zero_grad();
  scaled_backward(scaler, params);
  CHECK_THROWS_WITH_AS(scaler.update(), doctest::Contains("no inf checks"), tp::Error);  // nothing stepped yet

  torch::optim::SGD empty({at::zeros({3}, at::requires_grad())}, sgd_options());
  CHECK_THROWS_WITH_AS(scaler.step(empty), doctest::Contains("none of its parameters has a gradient"), tp::Error);

  at::Tensor half = at::zeros({3}, at::TensorOptions().dtype(at::kHalf).requires_grad(true));
  half.mutable_grad() = at::ones({3}, at::kHalf);
  torch::optim::SGD half_sgd({half}, sgd_options());
  CHECK_THROWS_WITH_AS(scaler.unscale(half_sgd), doctest::Contains("float16 gradients"), tp::Error);
}

TEST_CASE("GradScaler: state save/load round trip") {
  const auto opts = tp::GradScalerOptions().init_scale(1 << 20).growth_interval(3);
  auto params = make_params();
  torch::optim::SGD sgd(params, sgd_options());
  tp::GradScaler scaler(opts);
  // One overflow and two finite steps: scale 2^19, tracker 2.
  for (double factor : {std::numeric_limits<double>::infinity(), 1.0, 1.0}) {
    sgd.zero_grad();
    scaled_backward(scaler, params, factor);
    scaler.step(sgd);
    scaler.update();
  }
  const tp::GradScalerState saved = scaler.state();
  CHECK(saved.enabled);
  CHECK(saved.scale == std::ldexp(1.0, 19));
  CHECK(saved.growth_tracker == 2);
  CHECK(saved.growth_factor == 2.0);
  CHECK(saved.backoff_factor == 0.5);
  CHECK(saved.growth_interval == 3);

  // Into a fresh scaler (before its first scale()) with different options: the state wins, as
  // with Python's load_state_dict.
  tp::GradScaler restored(tp::GradScalerOptions().growth_interval(50).growth_factor(4.0));
  restored.load_state(saved);
  CHECK(restored.get_scale() == saved.scale);
  CHECK(restored.get_growth_tracker() == 2);
  CHECK(restored.options().growth_factor() == 2.0);
  CHECK(restored.options().growth_interval() == 3);

  // Both continue identically: the next finite step completes the interval and grows the scale.
  for (tp::GradScaler* s : {&scaler, &restored}) {
    sgd.zero_grad();
    scaled_backward(*s, params);
    CHECK(s->step(sgd));
    s->update();
    CHECK(s->get_scale() == std::ldexp(1.0, 20));
    CHECK(s->get_growth_tracker() == 0);
  }

  // Into a scaler whose tensors already exist.
  scaler.load_state(saved);
  CHECK(scaler.get_scale() == saved.scale);
  CHECK(scaler.get_growth_tracker() == 2);

  // Disabled on either side.
  tp::GradScaler disabled(tp::GradScalerOptions().enabled(false));
  CHECK_NOTHROW(disabled.load_state(saved));
  CHECK(disabled.get_scale() == 1.0);
  CHECK_THROWS_WITH_AS(scaler.load_state(disabled.state()), doctest::Contains("disabled GradScaler"), tp::Error);
  tp::GradScalerState bad = saved;
  bad.scale = -1.0;
  CHECK_THROWS_AS(scaler.load_state(bad), tp::Error);
  CHECK(scaler.get_scale() == saved.scale);  // a rejected state changes nothing
}
