// optim.name = "lamb" on the host's side alone (timm's numbers: lamb_timm_oracle.py): a checkpoint
// in the middle resumes bit for bit, the groups are adamw's (weight-decay split, rules, layer
// decay), the keys LAMB has no use for are refused by name, and the double-clip warning.
#include <torch/optim/adamw.h>

#include "optimizer_test_util.h"

namespace {

tp::OptimSection lamb_section() {
  tp::OptimSection o = tp::test::optim_section("lamb");
  o.lr = 0.01;
  o.weight_decay = 0.1;
  o.eps = 1e-6;
  o.param_groups = {{"head.*", 0.02, std::nullopt}, {"norm.*", std::nullopt, 0.05}};
  return o;
}

}  // namespace

TEST_CASE("lamb: save after 3 steps, load into a new optimizer, 3 more equals 6 steps bit for bit") {
  for (const bool always_adapt : {false, true}) {
    INFO("always_adapt ", always_adapt);
    tp::OptimSection o = lamb_section();
    o.always_adapt = always_adapt;
    uint64_t seed = 7;
    const std::vector<at::Tensor> init = tp::test::model_values(seed);
    uint64_t straight_seed = seed, resumed_seed = seed;
    tp::test::OptimizerRun straight = tp::test::start_optimizer_run(o, init);
    tp::test::step_with_random_gradients(straight, straight_seed, 6);

    tp::test::OptimizerRun first = tp::test::start_optimizer_run(o, init);
    tp::test::step_with_random_gradients(first, resumed_seed, 3);
    const std::string bytes = tp::test::archive_of(*first.built.optimizer);
    tp::test::OptimizerRun second = tp::test::start_optimizer_run(o, tp::test::values_of(first));
    tp::test::load_archive(*second.built.optimizer, bytes);
    tp::test::step_with_random_gradients(second, resumed_seed, 3);
    for (size_t i = 0; i < straight.state.size(); ++i) {
      INFO(straight.state[i].name);
      CHECK(at::equal(second.state[i].tensor, straight.state[i].tensor));
      CHECK_FALSE(at::equal(init[i], straight.state[i].tensor));
    }
    // The archive carries the options too: a resumed run keeps the saved group lrs.
    CHECK(second.built.optimizer->param_groups()[0].options().get_lr() == o.lr);
  }
}

TEST_CASE("lamb: parameter groups, layer decay included, are adamw's") {
  uint64_t seed = 11;
  const std::vector<at::Tensor> init = tp::test::model_values(seed);
  const tp::LayerDepths depths = {{"fc", 0}, {"norm", 1}};
  for (const double layer_decay : {1.0, 0.5}) {
    tp::OptimSection lamb = lamb_section();
    lamb.layer_decay = layer_decay;
    tp::OptimSection adamw = lamb;
    adamw.name = "adamw";
    const auto state = tp::test::model_state(init);
    const tp::BuiltOptimizer a = tp::make_optimizer(lamb, state, &depths);
    const tp::BuiltOptimizer b = tp::make_optimizer(adamw, state, &depths);
    CHECK_FALSE(a.fused);
    REQUIRE(a.group_names == b.group_names);
    for (size_t g = 0; g < a.group_names.size(); ++g) {
      const auto& la = static_cast<const torch::optim::AdamWOptions&>(a.optimizer->param_groups()[g].options());
      const auto& lb = static_cast<const torch::optim::AdamWOptions&>(b.optimizer->param_groups()[g].options());
      CHECK(la.lr() == lb.lr());
      CHECK(la.weight_decay() == lb.weight_decay());
      CHECK(la.eps() == 1e-6);
    }
  }
}

TEST_CASE("lamb: amsgrad and fused are refused naming the key; the double clip is a warning") {
  uint64_t seed = 3;
  const std::vector<at::Tensor> init = tp::test::model_values(seed);
  tp::OptimSection o = lamb_section();
  o.amsgrad = true;
  CHECK(tp::test::config_error_key(o, init) == "optim.amsgrad");
  o = lamb_section();
  o.implementation = "fused";
  CHECK(tp::test::config_error_key(o, init) == "optim.implementation");
  o.implementation = "for_loop";
  CHECK(tp::test::config_error_key(o, init).empty());

  o = lamb_section();
  CHECK(tp::double_clip_warning(o, 0.0).empty());
  const std::string twice = tp::double_clip_warning(o, 0.5);
  CHECK(twice.find("train.max_grad_norm = 0.5") != std::string::npos);
  CHECK(twice.find("optim.lamb_max_grad_norm = 1") != std::string::npos);
  o.lamb_max_grad_norm = 0;
  CHECK(tp::double_clip_warning(o, 0.5).empty());
  CHECK(tp::double_clip_warning(tp::test::optim_section("adamw"), 0.5).empty());
}
