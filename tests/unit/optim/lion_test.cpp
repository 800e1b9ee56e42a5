// optim.name = "lion" on the host's side alone (timm's numbers: lion_timm_oracle.py): a checkpoint
// in the middle resumes bit for bit, the groups are adamw's (weight-decay split, rules, layer
// decay), and the keys Lion has no use for are refused by name.
#include <torch/optim/adamw.h>

#include <tuple>

#include "optimizer_test_util.h"

namespace {

tp::OptimSection lion_section() {
  tp::OptimSection o = tp::test::optim_section("lion");
  o.lr = 0.01;
  o.weight_decay = 0.1;
  o.betas = {0.9, 0.99};
  o.param_groups = {{"head.*", 0.02, std::nullopt}, {"norm.*", std::nullopt, 0.05}};
  return o;
}

}  // namespace

TEST_CASE("lion: save after 3 steps, load into a new optimizer, 4 more equals 7 steps bit for bit") {
  // betas (0.99, 0.5): the momentum outweighs each new gradient, so a lost state would show.
  for (const auto& [caution, beta1, beta2] : {std::tuple{false, 0.9, 0.99}, {true, 0.9, 0.99}, {false, 0.99, 0.5}}) {
    INFO("caution ", caution, ", betas ", beta1, " ", beta2);
    tp::OptimSection o = lion_section();
    o.caution = caution;
    o.betas = {beta1, beta2};
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
    // The archive carries the options too: a resumed run keeps the saved lrs, betas and caution.
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(
        second.built.optimizer->param_groups()[0].options());
    CHECK(options.get_lr() == o.lr);
    CHECK(std::get<1>(options.betas()) == beta2);
  }
}

TEST_CASE("lion: a fresh optimizer without the momentum differs, so the archive's state is what resumed") {
  tp::OptimSection o = lion_section();
  o.betas = {0.99, 0.5};
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

TEST_CASE("lion: parameter groups, layer decay included, are adamw's") {
  uint64_t seed = 11;
  const std::vector<at::Tensor> init = tp::test::model_values(seed);
  const tp::LayerDepths depths = {{"fc", 0}, {"norm", 1}};
  for (const double layer_decay : {1.0, 0.5}) {
    tp::OptimSection lion = lion_section();
    lion.layer_decay = layer_decay;
    tp::OptimSection adamw = lion;
    adamw.name = "adamw";
    const auto state = tp::test::model_state(init);
    const tp::BuiltOptimizer a = tp::make_optimizer(lion, state, &depths);
    const tp::BuiltOptimizer b = tp::make_optimizer(adamw, state, &depths);
    CHECK_FALSE(a.fused);
    REQUIRE(a.group_names == b.group_names);
    for (size_t g = 0; g < a.group_names.size(); ++g) {
      const auto& la = static_cast<const torch::optim::AdamWOptions&>(a.optimizer->param_groups()[g].options());
      const auto& lb = static_cast<const torch::optim::AdamWOptions&>(b.optimizer->param_groups()[g].options());
      CHECK(la.lr() == lb.lr());
      CHECK(la.weight_decay() == lb.weight_decay());
    }
  }
}

TEST_CASE("lion: amsgrad, fused and caution elsewhere are refused naming the key") {
  uint64_t seed = 3;
  const std::vector<at::Tensor> init = tp::test::model_values(seed);
  tp::OptimSection o = lion_section();
  o.amsgrad = true;
  CHECK(tp::test::config_error_key(o, init) == "optim.amsgrad");
  o = lion_section();
  o.implementation = "fused";
  CHECK(tp::test::config_error_key(o, init) == "optim.implementation");
  o.implementation = "for_loop";
  CHECK(tp::test::config_error_key(o, init).empty());
  for (const char* other : {"adamw", "lamb", "sgd"}) {
    INFO(other);
    tp::OptimSection cautious = tp::test::optim_section(other);
    cautious.caution = true;
    CHECK(tp::test::config_error_key(cautious, init) == "optim.caution");
  }
  CHECK_FALSE(tp::has_fused_kernel("lion"));
}
