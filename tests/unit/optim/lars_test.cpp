// optim.name = "lars" on the host's side alone (timm's numbers: lars_timm_oracle.py): a checkpoint
// in the middle resumes bit for bit (the momentum buffer is in the archive), biases and norms
// take the plain momentum step (no decay, no trust ratio), and the keys LARS has no use for, or
// combinations torch and timm refuse, are refused by name.
#include <torch/optim/sgd.h>

#include <tuple>

#include "optimizer_test_util.h"

namespace {

tp::OptimSection lars_section() {
  tp::OptimSection o = tp::test::optim_section("lars");
  o.lr = 0.1;
  o.weight_decay = 0.1;
  o.momentum = 0.9;
  o.param_groups = {{"head.*", 0.2, std::nullopt}, {"norm.*", std::nullopt, 0.05}};
  return o;
}

}  // namespace

TEST_CASE("lars: save after 3 steps, load into a new optimizer, 4 more equals 7 steps bit for bit") {
  for (const auto& [nesterov, trust_clip, dampening] :
       {std::tuple{false, false, 0.0}, {true, false, 0.0}, {false, true, 0.0}, {false, false, 0.5}}) {
    INFO("nesterov ", nesterov, ", trust_clip ", trust_clip, ", dampening ", dampening);
    tp::OptimSection o = lars_section();
    o.nesterov = nesterov;
    o.trust_clip = trust_clip;
    o.dampening = dampening;
    uint64_t seed = 7;
    const std::vector<at::Tensor> init = tp::test::model_values(seed);
    uint64_t straight_seed = seed, resumed_seed = seed;
    tp::test::OptimizerRun straight = tp::test::start_optimizer_run(o, init);
    tp::test::step_with_random_gradients(straight, straight_seed, 7);

    tp::test::OptimizerRun first = tp::test::start_optimizer_run(o, init);
    tp::test::step_with_random_gradients(first, resumed_seed, 3);
    const std::string bytes = tp::test::archive_of(*first.built.optimizer);
    tp::test::OptimizerRun second = tp::test::start_optimizer_run(o, tp::test::values_of(first));
    tp::test::load_archive(*second.built.optimizer, bytes);
    tp::test::step_with_random_gradients(second, resumed_seed, 4);
    for (size_t i = 0; i < straight.state.size(); ++i) {
      INFO(straight.state[i].name);
      CHECK(at::equal(second.state[i].tensor, straight.state[i].tensor));
      CHECK_FALSE(at::equal(init[i], straight.state[i].tensor));
    }
    // The archive carries the options too: a resumed run keeps the saved lrs and LARS's keys.
    const auto& options = static_cast<const torch::optim::SGDOptions&>(
        second.built.optimizer->param_groups()[0].options());
    CHECK(options.get_lr() == o.lr);
    CHECK(options.nesterov() == nesterov);
    CHECK(options.dampening() == dampening);
  }
}

TEST_CASE("lars: a fresh optimizer without the momentum buffer differs, so the archive's state is what resumed") {
  tp::OptimSection o = lars_section();
  uint64_t seed = 5;
  const std::vector<at::Tensor> init = tp::test::model_values(seed);
  uint64_t a_seed = seed, b_seed = seed;
  tp::test::OptimizerRun straight = tp::test::start_optimizer_run(o, init);
  tp::test::step_with_random_gradients(straight, a_seed, 4);
  tp::test::OptimizerRun first = tp::test::start_optimizer_run(o, init);
  tp::test::step_with_random_gradients(first, b_seed, 2);
  tp::test::OptimizerRun restarted = tp::test::start_optimizer_run(o, tp::test::values_of(first));
  tp::test::step_with_random_gradients(restarted, b_seed, 2);
  CHECK_FALSE(at::equal(restarted.state[0].tensor, straight.state[0].tensor));
}

TEST_CASE("lars: biases take the plain momentum step (no decay, no trust ratio) unless always_adapt") {
  // fc.bias and head.bias are 1-D: the default rule gives them no weight decay, so timm's Lars
  // (and the host's) skips their adaptation; one step without momentum moves them by lr x grad.
  tp::OptimSection o = lars_section();
  o.momentum = 0.0;
  uint64_t seed = 13;
  const std::vector<at::Tensor> init = tp::test::model_values(seed);
  for (const bool always_adapt : {false, true}) {
    INFO("always_adapt ", always_adapt);
    o.always_adapt = always_adapt;
    tp::test::OptimizerRun run = tp::test::start_optimizer_run(o, init);
    uint64_t grad_seed = 99;
    tp::test::step_with_random_gradients(run, grad_seed, 1);
    uint64_t replay = 99;
    std::vector<at::Tensor> grads;
    for (const auto& s : run.state) grads.push_back(tp::test::lcg_tensor(replay, s.tensor.sizes().vec(), 1.0));
    const at::Tensor plain = init[1] - o.lr * grads[1];  // fc.bias
    CHECK(at::allclose(run.state[1].tensor, plain) == !always_adapt);
    // fc.weight decays, so it is always adapted: its step is far below lr x grad (eta = 0.001).
    CHECK((run.state[0].tensor - init[0]).abs().max().item<double>() < 0.01 * o.lr);
  }
}

TEST_CASE("lars: nesterov with dampening or without momentum, amsgrad, caution, fused and dampening elsewhere are "
          "refused naming the key") {
  uint64_t seed = 3;
  const std::vector<at::Tensor> init = tp::test::model_values(seed);
  tp::OptimSection o = lars_section();
  o.nesterov = true;
  o.dampening = 0.1;
  CHECK(tp::test::config_error_key(o, init) == "optim.nesterov");
  o.dampening = 0.0;
  o.momentum = 0.0;
  CHECK(tp::test::config_error_key(o, init) == "optim.nesterov");
  o = lars_section();
  o.amsgrad = true;
  CHECK(tp::test::config_error_key(o, init) == "optim.amsgrad");
  o = lars_section();
  o.caution = true;
  CHECK(tp::test::config_error_key(o, init) == "optim.caution");
  o = lars_section();
  o.implementation = "fused";
  CHECK(tp::test::config_error_key(o, init) == "optim.implementation");
  o.implementation = "for_loop";
  CHECK(tp::test::config_error_key(o, init).empty());
  for (const char* other : {"adamw", "lamb", "lion", "rmsprop"}) {
    INFO(other);
    tp::OptimSection damped = tp::test::optim_section(other);
    damped.dampening = 0.5;
    CHECK(tp::test::config_error_key(damped, init) == "optim.dampening");
  }
  tp::OptimSection sgd = tp::test::optim_section("sgd");
  sgd.dampening = 0.5;
  CHECK(tp::test::config_error_key(sgd, init).empty());
  CHECK_FALSE(tp::has_fused_kernel("lars"));
}
