// make_optimizer's parameter groups, implementation choice and configuration errors, and a
// schedule over the resulting groups (each group scaled from its own lr).
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include "optimizer_test_util.h"
#include "tp/framework/error.h"
#include "tp/framework/optim/lr_scheduler.h"
#include "tp/framework/optim/optimizer_factory.h"

namespace {

std::vector<tp::StateTensor> sample_state() {
  uint64_t seed = 1;
  std::vector<at::Tensor> values;
  for (const auto& p : tp::test::model_spec()) values.push_back(tp::test::lcg_tensor(seed, p.shape, 0.5));
  auto state = tp::test::model_state(values);
  state.push_back({"frozen.weight", at::ones({2, 2}), false});          // requires_grad = false
  state.push_back({"norm.running_mean", at::zeros({6}), /*is_buffer=*/true});
  return state;
}

double weight_decay(const torch::optim::OptimizerParamGroup& g) {
  if (auto* o = dynamic_cast<const torch::optim::AdamWOptions*>(&g.options())) return o->weight_decay();
  if (auto* o = dynamic_cast<const torch::optim::AdamOptions*>(&g.options())) return o->weight_decay();
  if (auto* o = dynamic_cast<const torch::optim::SGDOptions*>(&g.options())) return o->weight_decay();
  if (auto* o = dynamic_cast<const torch::optim::RMSpropOptions*>(&g.options())) return o->weight_decay();
  FAIL("unknown options type");
  return -1;
}

using Names = std::vector<std::string>;

std::string config_error_key(const tp::OptimSection& o, const std::vector<tp::StateTensor>& state,
                             std::string* message = nullptr) {
  try {
    tp::make_optimizer(o, state);
  } catch (const tp::ConfigError& e) {
    if (message != nullptr) *message = e.what();
    return e.key_path();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("default rule: decay on dim >= 2, none on dim < 2, frozen parameters and buffers left out") {
  auto o = tp::test::optim_section("adamw");
  o.weight_decay = 0.1;
  const tp::BuiltOptimizer built = tp::make_optimizer(o, sample_state());
  REQUIRE(built.group_names.size() == 2);
  CHECK(built.group_names[0] == Names{"fc.weight", "head.weight"});
  CHECK(built.group_names[1] == Names{"fc.bias", "norm.weight", "head.bias"});
  const auto& groups = built.optimizer->param_groups();
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].params().size() == 2);
  CHECK(weight_decay(groups[0]) == 0.1);
  CHECK(weight_decay(groups[1]) == 0.0);
  CHECK(tp::current_lr(*built.optimizer) == o.lr);
}

TEST_CASE("param-group rules: first match wins, one group per (rule, decay) pair, empty ones omitted") {
  auto o = tp::test::optim_section("sgd");
  o.lr = 0.1;
  o.weight_decay = 0.01;
  o.param_groups = {{"head.*", 0.5, std::nullopt}, {"*.bias", std::nullopt, 0.2}, {"*norm*", 0.3, 0.0}};
  const tp::BuiltOptimizer built = tp::make_optimizer(o, sample_state());
  const auto& groups = built.optimizer->param_groups();
  REQUIRE(built.group_names.size() == groups.size());
  REQUIRE(groups.size() == 5);
  // default decay; head.* decay and no-decay; *.bias (sets weight_decay: one group); *norm*.
  CHECK(built.group_names[0] == Names{"fc.weight"});
  CHECK(built.group_names[1] == Names{"head.weight"});
  CHECK(built.group_names[2] == Names{"head.bias"});  // head.* wins over *.bias
  CHECK(built.group_names[3] == Names{"fc.bias"});
  CHECK(built.group_names[4] == Names{"norm.weight"});
  const std::vector<double> lrs = {0.1, 0.5, 0.5, 0.1, 0.3};
  const std::vector<double> wds = {0.01, 0.01, 0.0, 0.2, 0.0};
  for (size_t i = 0; i < groups.size(); ++i) {
    INFO("group ", i);
    CHECK(groups[i].options().get_lr() == lrs[i]);
    CHECK(weight_decay(groups[i]) == wds[i]);
    CHECK(groups[i].params().size() == built.group_names[i].size());
  }
}

TEST_CASE("group values equal to a LibTorch constructor default are kept, not replaced by the optimizer's") {
  // add_param_group() treats a group field equal to the options' constructor default as unset;
  // AdamW's default weight_decay is 0.01 and Adam's lr 1e-3.
  auto o = tp::test::optim_section("adamw");
  o.lr = 0.01;
  o.weight_decay = 0.1;
  o.param_groups = {{"head.*", 1e-3, 0.01}};
  const tp::BuiltOptimizer built = tp::make_optimizer(o, sample_state());
  const auto& groups = built.optimizer->param_groups();
  REQUIRE(groups.size() == 3);
  CHECK(built.group_names[2] == Names{"head.weight", "head.bias"});
  CHECK(groups[2].options().get_lr() == 1e-3);
  CHECK(weight_decay(groups[2]) == 0.01);
  CHECK(weight_decay(groups[0]) == 0.1);
}

TEST_CASE("a rule that matches no parameter is a ConfigError naming its pattern and some names") {
  auto o = tp::test::optim_section("adamw");
  o.param_groups = {{"head.*", 0.5, std::nullopt}, {"encoder.*", 0.1, std::nullopt}};
  std::string message;
  CHECK(config_error_key(o, sample_state(), &message) == "optim.param_groups[1].pattern");
  CHECK(message.find("\"encoder.*\"") != std::string::npos);
  CHECK(message.find("'fc.weight'") != std::string::npos);
  // Frozen parameters are not trainable: a rule for them alone matches nothing.
  o.param_groups = {{"frozen.*", 0.5, std::nullopt}};
  CHECK(config_error_key(o, sample_state()) == "optim.param_groups[0].pattern");
  // A rule whose parameters all went to an earlier rule says which rule took them.
  o.param_groups = {{"*", 0.5, std::nullopt}, {"head.*", 0.1, std::nullopt}};
  CHECK(config_error_key(o, sample_state(), &message) == "optim.param_groups[1].pattern");
  CHECK(message.find("optim.param_groups[0]") != std::string::npos);
}

TEST_CASE("implementation: auto is fused where a kernel exists, fused is refused where none does") {
  const auto state = sample_state();
  for (const std::string name : {"sgd", "adam", "adamw"}) {
    INFO(name);
    CHECK(tp::make_optimizer(tp::test::optim_section(name, "auto"), state).fused);
    CHECK(tp::make_optimizer(tp::test::optim_section(name, "fused"), state).fused);
    CHECK_FALSE(tp::make_optimizer(tp::test::optim_section(name, "for_loop"), state).fused);
  }
  const tp::BuiltOptimizer sgd = tp::make_optimizer(tp::test::optim_section("sgd", "fused"), state);
  CHECK(dynamic_cast<torch::optim::SGD*>(sgd.optimizer.get()) != nullptr);  // same state, same save()/load()
  CHECK_FALSE(tp::make_optimizer(tp::test::optim_section("rmsprop", "auto"), state).fused);
  std::string message;
  CHECK(config_error_key(tp::test::optim_section("rmsprop", "fused"), state, &message) == "optim.implementation");
  CHECK(message.find("no fused rmsprop kernel") != std::string::npos);
  CHECK(config_error_key(tp::test::optim_section("lamb", "fused"), state, &message) == "optim.implementation");
  CHECK(message.find("no fused lamb kernel") != std::string::npos);
  // A parameter the kernels cannot update: auto falls back to the loop, fused is an error.
  std::vector<tp::StateTensor> strided{{"w", at::ones({4, 6}).slice(1, 0, 6, 2).requires_grad_(), false}};
  CHECK_FALSE(tp::make_optimizer(tp::test::optim_section("adamw", "auto"), strided).fused);
  CHECK(config_error_key(tp::test::optim_section("adamw", "fused"), strided, &message) == "optim.implementation");
  CHECK(message.find("'w'") != std::string::npos);
}

TEST_CASE("configuration errors name their key") {
  const auto state = sample_state();
  CHECK(config_error_key(tp::test::optim_section("adagrad"), state) == "optim.name");
  auto nesterov = tp::test::optim_section("sgd");
  nesterov.nesterov = true;
  nesterov.momentum = 0;
  CHECK(config_error_key(nesterov, state) == "optim.nesterov");
  std::vector<tp::StateTensor> frozen{{"w", at::ones({2, 2}), false}};
  CHECK_THROWS_AS(tp::make_optimizer(tp::test::optim_section("sgd"), frozen), tp::Error);
}

TEST_CASE("a schedule scales every group from its own lr") {
  auto o = tp::test::optim_section("adamw");
  o.lr = 0.01;
  o.param_groups = {{"head.*", 0.1, std::nullopt}};
  tp::BuiltOptimizer built = tp::make_optimizer(o, sample_state());
  tp::SchedulerOptions s;
  s.name = "cosine";
  s.warmup_steps = 2;
  auto schedule = tp::make_scheduler(s, *built.optimizer, 10);
  for (int t = 0; t < 5; ++t) schedule->step();
  const std::vector<double> lrs = schedule->lrs();
  REQUIRE(lrs.size() == 4);
  const double factor = lrs[0] / 0.01;
  CHECK(factor > 0.1);
  CHECK(factor < 1.0);
  CHECK(lrs[1] == doctest::Approx(0.01 * factor).epsilon(1e-12));
  CHECK(lrs[2] == doctest::Approx(0.1 * factor).epsilon(1e-12));
  CHECK(lrs[3] == doctest::Approx(0.1 * factor).epsilon(1e-12));
}

TEST_CASE("layer_decay: lr x decay^(deepest - depth) by the longest claiming prefix; unclaimed parameters are the head") {
  // fc at depth 0, norm at depth 1 ("norm" also claims "norm.weight"; "fc.w" claims nothing: whole
  // dotted components only), head unclaimed: depth 2, the deepest, full lr.
  auto o = tp::test::optim_section("adamw");
  o.lr = 0.1;
  o.weight_decay = 0.05;
  o.layer_decay = 0.5;
  const tp::LayerDepths depths = {{"fc", 0}, {"norm", 1}, {"fc.w", 1}, {"frozen", 0}};
  const tp::BuiltOptimizer built = tp::make_optimizer(o, sample_state(), &depths);
  // The deepest first within the decay slot, then within the no-decay slot.
  REQUIRE(built.group_names.size() == 5);
  CHECK(built.group_names[0] == Names{"head.weight"});
  CHECK(built.group_names[1] == Names{"fc.weight"});
  CHECK(built.group_names[2] == Names{"head.bias"});
  CHECK(built.group_names[3] == Names{"norm.weight"});
  CHECK(built.group_names[4] == Names{"fc.bias"});
  const auto& groups = built.optimizer->param_groups();
  const double want[] = {0.1, 0.025, 0.1, 0.05, 0.025};
  for (std::size_t i = 0; i < 5; ++i) {
    CAPTURE(i);
    CHECK(groups[i].options().get_lr() == want[i]);
    CHECK(weight_decay(groups[i]) == (i < 2 ? 0.05 : 0.0));
  }
  CHECK(tp::current_lr(*built.optimizer) == 0.1); // the history's lr stays the schedule's own

  // With a [[optim.param_groups]] lr, the scale multiplies the rule's lr.
  o.param_groups = {{"head.*", 1.0, std::nullopt}};
  const tp::BuiltOptimizer ruled = tp::make_optimizer(o, sample_state(), &depths);
  for (std::size_t i = 0; i < ruled.group_names.size(); ++i)
    if (ruled.group_names[i].front().starts_with("head.")) CHECK(ruled.optimizer->param_groups()[i].options().get_lr() == 1.0);

  // 1.0 turns it off (the default groups, depths ignored); above 1 and at most 0 are refused.
  o.param_groups.clear();
  o.layer_decay = 1.0;
  CHECK(tp::make_optimizer(o, sample_state(), &depths).group_names.size() == 2);
  std::string message;
  o.layer_decay = 1.5;
  CHECK(config_error_key(o, sample_state(), &message) == "optim.layer_decay");
  CHECK(message.find("outside (0, 1]") != std::string::npos);
}
