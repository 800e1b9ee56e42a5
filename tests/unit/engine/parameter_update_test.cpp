// ParameterUpdate (engine/training/parameter_update.h), the update a CUDA graph captures, on the CPU: with
// a fused optimizer under fp16 its skip is decided on the device and must equal the host's
// decision (GradScaler::step) bit for bit; its statistics accumulate in place and read back as
// the eager code computed them; advance() moves time on after every window, calls the model's per-step
// hook and folds the EMA in.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "tp/framework/amp/grad_scaler.h"
#include "engine/training/parameter_update.h"
#include "tp/framework/optim/lr_scheduler.h"
#include "tp/framework/optim/optimizer_factory.h"
#include "unit/optim/optimizer_test_util.h"

#include "support/doctest_after_torch.h"

namespace {

tp::OptimSection fused_sgd_section() {
  tp::OptimSection o = tp::test::optim_section("sgd", "fused");
  o.lr = 0.05;
  o.weight_decay = 0.0;
  return o;
}

tp::AmpSection fp16_amp() {
  tp::AmpSection a;
  a.precision = tp::Precision::Fp16;
  a.init_scale = 1024.0;
  a.growth_factor = 2.0;
  a.backoff_factor = 0.5;
  a.growth_interval = 2000;
  return a;
}

tp::AmpSection fp32_amp() {
  tp::AmpSection a = fp16_amp();
  a.precision = tp::Precision::Fp32;
  return a;
}

/// Fused SGD without momentum at lr 1: one step subtracts the gradient.
tp::OptimSection plain_sgd_section() {
  tp::OptimSection o = fused_sgd_section();
  o.momentum = 0.0;
  o.lr = 1.0;
  return o;
}

tp::TrainSection clipping_train(double max_grad_norm) {
  tp::TrainSection t{};
  t.max_grad_norm = max_grad_norm;
  t.grad_norm_type = 2.0;
  t.clip_value = 0.0;
  return t;
}

std::vector<tp::StateTensor> trainable_params(const std::vector<at::Tensor>& values) {
  std::vector<tp::StateTensor> state;
  for (size_t i = 0; i < values.size(); ++i)
    state.push_back({"p" + std::to_string(i), values[i].clone().requires_grad_(), false});
  return state;
}

/// A run's config with these sections (the rest value-initialised: no EMA, no SWA).
tp::RunConfig update_config(const tp::TrainSection& train, const tp::AmpSection& amp) {
  tp::RunConfig config{};
  config.train = train;
  config.amp = amp;
  return config;
}

// Gradients as backward through a scaled loss leaves them: `scale` times the true ones.
void set_scaled_grads(std::vector<tp::StateTensor>& state, const std::vector<at::Tensor>& grads, double scale) {
  for (size_t i = 0; i < state.size(); ++i) state[i].tensor.mutable_grad() = grads[i] * scale;
}

}  // namespace

TEST_CASE("fp16 with a fused optimizer: the device's skip equals the host's, bit for bit") {
  const std::vector<at::Tensor> init = {at::linspace(-1, 1, 12).reshape({3, 4}), at::linspace(0.5, -0.5, 3)};
  const std::vector<std::vector<at::Tensor>> grads = {
      {at::full({3, 4}, 0.25), at::full({3}, -0.5)},
      {at::full({3, 4}, std::numeric_limits<float>::infinity()), at::full({3}, 1.0)}, // overflow: skipped
      {at::linspace(-2, 2, 12).reshape({3, 4}), at::full({3}, 0.125)},
      {at::linspace(1, 3, 12).reshape({3, 4}), at::full({3}, std::nan(""))},          // overflow: skipped
      {at::linspace(0.5, 1, 12).reshape({3, 4}), at::full({3}, -1.0)}};
  const tp::RunConfig config = update_config(clipping_train(0.0), fp16_amp());
  tp::Logger log;

  // The update under test.
  std::vector<tp::StateTensor> state = trainable_params(init);
  tp::BuiltOptimizer built = tp::make_optimizer(fused_sgd_section(), state);
  tp::ParameterUpdate update(config, built, state, c10::Device(c10::kCPU), log);
  // The reference: the same fused optimizer stepped by GradScaler::step, which reads the flag on the host.
  std::vector<tp::StateTensor> ref_state = trainable_params(init);
  tp::BuiltOptimizer ref = tp::make_optimizer(fused_sgd_section(), ref_state);
  tp::GradScaler ref_scaler(tp::GradScalerOptions().init_scale(1024.0));

  // The first momentum step is decided on the host (the kernel must be told it is the first),
  // which the update knows before any gradient exists (a graph capture asks it then).
  CHECK_FALSE(update.device_only());
  set_scaled_grads(state, grads[0], 1024.0);
  CHECK_FALSE(update.device_only());
  int64_t ref_skipped = 0;
  for (size_t s = 0; s < grads.size(); ++s) {
    CAPTURE(s);
    const double scale = update.scaler().get_scale();
    CHECK(scale == ref_scaler.get_scale());
    // scale() makes the scaler's tensors on the loss's device at its first call.
    (void)update.scaler().scale(at::ones({}));
    (void)ref_scaler.scale(at::ones({}));
    set_scaled_grads(state, grads[s], scale);
    set_scaled_grads(ref_state, grads[s], scale);
    update.stage();
    if (s > 0) CHECK(update.device_only());
    update.apply(at::Tensor(), /*measure_norm=*/false);
    if (!ref_scaler.step(*ref.optimizer)) ++ref_skipped;
    ref_scaler.update();
    ref.optimizer->zero_grad(true);
    for (size_t i = 0; i < state.size(); ++i) CHECK(at::equal(state[i].tensor.detach(), ref_state[i].tensor.detach()));
    CHECK_FALSE(state[0].tensor.grad().defined()); // gradients set to none after every update
  }
  CHECK(ref_skipped == 2);
  CHECK(update.scaler_skipped_steps() == 2);
  CHECK(update.scaler().get_scale() == 256.0); // backed off twice
  CHECK(update.read_stats().scaler_skipped == 2);
}

TEST_CASE("the logging window's statistics accumulate in place and restart after each read") {
  const std::vector<at::Tensor> init = {at::zeros({4}), at::zeros({2})};
  std::vector<tp::StateTensor> state = trainable_params(init);
  tp::OptimSection o = fused_sgd_section();
  o.momentum = 0.0;
  tp::BuiltOptimizer built = tp::make_optimizer(o, state);
  const tp::RunConfig config = update_config(clipping_train(/*max_grad_norm=*/5.0), fp32_amp());
  tp::Logger log;
  tp::ParameterUpdate update(config, built, state, c10::Device(c10::kCPU), log);
  // Norms 10 (clipped), 3 (not), then 4 (not): sqrt(6^2 + 8^2), sqrt(3^2), sqrt(4^2).
  const std::vector<std::vector<at::Tensor>> grads = {{at::tensor({6.0f, 0.0f, 0.0f, 0.0f}), at::tensor({8.0f, 0.0f})},
                                                      {at::tensor({3.0f, 0.0f, 0.0f, 0.0f}), at::zeros({2})},
                                                      {at::zeros({4}), at::tensor({0.0f, 4.0f})}};
  for (size_t s = 0; s < 2; ++s) {
    set_scaled_grads(state, grads[s], 1.0);
    update.stage();
    update.apply(at::Tensor(), false);
  }
  tp::UpdateStats stats = update.read_stats();
  CHECK(stats.grad_norm == doctest::Approx(3.0)); // the last measured step's norm
  CHECK(stats.clipped_fraction == doctest::Approx(0.5));
  CHECK_FALSE(stats.scaler_enabled);
  // The clip made the first update lr x (6, 8) x 5/10 (+1e-6 in the denominator, as PyTorch).
  CHECK(state[1].tensor[0].item<double>() == doctest::Approx(-0.05 * 8.0 * 5.0 / (10.0 + 1e-6) - 0.0).epsilon(1e-6));
  set_scaled_grads(state, grads[2], 1.0);
  update.stage();
  update.apply(at::Tensor(), false);
  stats = update.read_stats();
  CHECK(stats.grad_norm == doctest::Approx(4.0));
  CHECK(stats.clipped_fraction == doctest::Approx(0.0));
  // Nothing measured since the last read: NaN, as the history leaves train/grad_norm out.
  CHECK(std::isnan(update.read_stats().grad_norm));
}

TEST_CASE("a correction multiplies every gradient before the update") {
  std::vector<tp::StateTensor> state = trainable_params({at::zeros({2})});
  tp::BuiltOptimizer built = tp::make_optimizer(plain_sgd_section(), state);
  const tp::RunConfig config = update_config(clipping_train(0.0), fp32_amp());
  tp::Logger log;
  tp::ParameterUpdate update(config, built, state, c10::Device(c10::kCPU), log);
  state[0].tensor.mutable_grad() = at::tensor({1.0f, -2.0f});
  update.stage();
  update.apply(at::scalar_tensor(0.5, at::kDouble), false);
  CHECK(at::equal(state[0].tensor.detach(), at::tensor({-0.5f, 1.0f})));
}

TEST_CASE("advance: time moves on after every window, a skipped one included, and the EMA folds in every N steps") {
  std::vector<tp::StateTensor> state = trainable_params({at::zeros({2})});
  tp::BuiltOptimizer built = tp::make_optimizer(plain_sgd_section(), state);
  tp::RunConfig config = update_config(clipping_train(0.0), fp32_amp());
  config.ema.every_steps = 2;
  tp::Logger log;
  const c10::Device cpu(c10::kCPU);
  tp::ParameterUpdate update(config, built, state, cpu, log);
  tp::SchedulerOptions halving;
  halving.name = "step";
  halving.step_size = 1;
  halving.gamma = 0.5;
  update.set_schedule(tp::make_scheduler(halving, *built.optimizer, 10));
  update.set_ema(std::make_unique<tp::WeightAverage>("ema", tp::AverageRule{}, state, cpu));
  REQUIRE(update.averages().size() == 1);

  // A skipped window (nan_policy = "skip"): no update, yet the schedule and the count move on.
  CHECK(update.advance(/*updated=*/false) == std::vector<double>{1.0}); // each group's lr the step trained with
  CHECK(update.step() == 1);
  CHECK(tp::current_lr(*built.optimizer) == 0.5);
  CHECK(update.ema()->updates() == 0); // ema.every_steps = 2
  state[0].tensor.mutable_grad() = at::tensor({1.0f, -2.0f});
  update.stage();
  update.apply(at::Tensor(), false);
  CHECK(update.advance(/*updated=*/true) == std::vector<double>{0.5});
  CHECK(update.step() == 2);
  CHECK(update.ema()->updates() == 1); // the first update copies the weights
  CHECK(at::equal(update.ema()->state()[0].tensor, state[0].tensor.detach()));
  CHECK(update.weights_watch().first_non_finite_step() == -1);
}

TEST_CASE("advance: the model's per-step hook runs once per window, skipped ones included, after the count and before the EMA") {
  std::vector<tp::StateTensor> state = trainable_params({at::zeros({2})});
  tp::BuiltOptimizer built = tp::make_optimizer(plain_sgd_section(), state);
  tp::RunConfig config = update_config(clipping_train(0.0), fp32_amp());
  config.ema.every_steps = 2;
  tp::Logger log;
  const c10::Device cpu(c10::kCPU);
  tp::ParameterUpdate update(config, built, state, cpu, log);
  tp::SchedulerOptions constant;
  constant.name = "constant";
  update.set_schedule(tp::make_scheduler(constant, *built.optimizer, 10));
  update.set_ema(std::make_unique<tp::WeightAverage>("ema", tp::AverageRule{}, state, cpu));
  std::vector<int64_t> steps;
  std::vector<int64_t> ema_updates_seen;
  update.set_after_step([&](int64_t step) {
    steps.push_back(step);
    CHECK(update.step() == step);  // the count moved on first: the hook is told the step just done
    ema_updates_seen.push_back(update.ema()->updates());
    const c10::NoGradGuard no_grad;
    state[0].tensor.detach().fill_(static_cast<float>(step));  // what a momentum teacher's update does, in place
  });
  update.advance(/*updated=*/false);  // a skipped window still calls it
  update.advance(/*updated=*/true);
  update.advance(/*updated=*/true);
  CHECK(steps == std::vector<int64_t>{1, 2, 3});
  // At step 2 the EMA (every 2 steps) had not folded in yet, and its first fold copied what the
  // hook had just written: the hook runs before the EMA of the same step.
  CHECK(ema_updates_seen == std::vector<int64_t>{0, 0, 1});
  CHECK(update.ema()->updates() == 1);
  CHECK(at::equal(update.ema()->state()[0].tensor, at::full({2}, 2.0f)));
}
