// total_optimizer_steps, the factory's checks, and the multiplicative schedules (constant,
// step, multistep, exponential) against StepLR, MultiStepLR and ExponentialLR.
#include "scheduler_test_util.h"

using namespace tp;
using namespace tp::test;

TEST_CASE("total_optimizer_steps counts optimizer steps, the short last window included") {
  CHECK(total_optimizer_steps(10, 37, 4) == 100);  // ceil(37 / 4) = 10 per epoch
  CHECK(total_optimizer_steps(10, 36, 4) == 90);
  CHECK(total_optimizer_steps(3, 8, 1) == 24);
  CHECK(total_optimizer_steps(2, 3, 8) == 2);  // a window longer than the epoch: one step
  CHECK(total_optimizer_steps(0, 37, 4) == 0);
  CHECK(total_optimizer_steps(5, 0, 2) == 0);
  CHECK_THROWS_AS(total_optimizer_steps(1, 10, 0), Error);
  CHECK_THROWS_AS(total_optimizer_steps(-1, 10, 1), Error);
  CHECK_THROWS_AS(total_optimizer_steps(1, -10, 1), Error);
  CHECK_THROWS_AS(total_optimizer_steps(INT64_MAX / 2, 3, 1), Error);
}

TEST_CASE("constant leaves every group's lr and counts steps") {
  auto opt = make_sgd({0.1, 0.02});
  auto sched = make_scheduler({}, *opt, 0);
  CHECK(sched->name() == "constant");
  for (int i = 0; i < 20; ++i) sched->step();
  sched->step_metric(1.0);  // ignored
  CHECK(sched->steps_taken() == 20);
  CHECK(sched->lrs() == std::vector<double>{0.1, 0.02});
  CHECK(sched->lr() == 0.1);
}

TEST_CASE("step, multistep and exponential match PyTorch at every step") {
  auto oracle = run_oracle(R"PY(
run("step", sgd([0.1, 0.02]), lambda o: L.StepLR(o, step_size=7, gamma=0.5), 40)
run("step_default_gamma", sgd([0.1, 0.02]), lambda o: L.StepLR(o, step_size=3), 10)
run("multistep", sgd([0.1, 0.02]), lambda o: L.MultiStepLR(o, milestones=[12, 3, 7, 7], gamma=0.3), 20)
run("multistep_zero", sgd([0.1, 0.02]), lambda o: L.MultiStepLR(o, milestones=[0, 5], gamma=0.5), 8)
run("exponential", adamw([0.1, 0.02]), lambda o: L.ExponentialLR(o, gamma=0.93), 60)
)PY");

  SUBCASE("step") {
    SchedulerOptions o = named("step");
    o.step_size = 7;
    o.gamma = 0.5;
    auto opt = make_sgd({0.1, 0.02});
    auto sched = make_scheduler(o, *opt, 0);
    compare(record(*sched, *opt, 40).rows, oracle["step"].rows, "step (step_size 7, gamma 0.5)");
  }
  SUBCASE("step with PyTorch's default gamma 0.1") {
    SchedulerOptions o = named("step");
    o.step_size = 3;
    auto opt = make_sgd({0.1, 0.02});
    auto sched = make_scheduler(o, *opt, 0);
    compare(record(*sched, *opt, 10).rows, oracle["step_default_gamma"].rows, "step (default gamma)");
  }
  SUBCASE("multistep: unordered milestones, a duplicate decays twice") {
    SchedulerOptions o = named("multistep");
    o.milestones = {12, 3, 7, 7};
    o.gamma = 0.3;
    auto opt = make_sgd({0.1, 0.02});
    auto sched = make_scheduler(o, *opt, 0);
    compare(record(*sched, *opt, 20).rows, oracle["multistep"].rows, "multistep (milestones 12,3,7,7)");
  }
  SUBCASE("multistep: milestone 0 decays at construction, as MultiStepLR does") {
    SchedulerOptions o = named("multistep");
    o.milestones = {0, 5};
    o.gamma = 0.5;
    auto opt = make_sgd({0.1, 0.02});
    auto sched = make_scheduler(o, *opt, 0);
    CHECK(sched->lr() == 0.05);
    compare(record(*sched, *opt, 8).rows, oracle["multistep_zero"].rows, "multistep (milestone 0)");
  }
  SUBCASE("exponential") {
    SchedulerOptions o = named("exponential");
    o.gamma = 0.93;
    auto opt = make_adamw({0.1, 0.02});
    auto sched = make_scheduler(o, *opt, 0);
    compare(record(*sched, *opt, 60).rows, oracle["exponential"].rows, "exponential (gamma 0.93)");
  }
}

namespace {
// The key path of the ConfigError make_scheduler throws, or "" if it does not throw.
std::string rejected_key(const SchedulerOptions& o, int64_t total_steps, torch::optim::Optimizer& opt) {
  try {
    make_scheduler(o, opt, total_steps);
  } catch (const ConfigError& e) {
    MESSAGE(std::string(e.what()));
    return e.key_path();
  }
  return "";
}
}  // namespace

TEST_CASE("make_scheduler rejects invalid options with the [schedule] key path") {
  auto opt = make_sgd({0.1, 0.02});
  SchedulerOptions o;

  CHECK(rejected_key(named("warmup_cosine"), 100, *opt) == "schedule.name");
  CHECK(rejected_key(named("step"), 100, *opt) == "schedule.step_size");
  CHECK(rejected_key(named("exponential"), 100, *opt) == "schedule.gamma");
  CHECK(rejected_key(named("cosine"), 0, *opt) == "schedule.name");

  o = named("cosine");
  o.warmup_steps = 101;
  CHECK(rejected_key(o, 100, *opt) == "schedule.warmup_steps");
  o = named("linear");
  o.min_lr = {0.0, 0.0, 0.0};
  CHECK(rejected_key(o, 100, *opt) == "schedule.min_lr");
  o = named("linear");
  o.warmup_start_factor = 1.5;
  CHECK(rejected_key(o, 100, *opt) == "schedule.warmup_start_factor");

  CHECK(rejected_key(named("one_cycle"), 100, *opt) == "schedule.max_lr");
  o = named("one_cycle");
  o.max_lr = {0.1, 0.2, 0.3};
  CHECK(rejected_key(o, 100, *opt) == "schedule.max_lr");
  o.max_lr = {0.1};
  o.anneal_strategy = "cosine";
  CHECK(rejected_key(o, 100, *opt) == "schedule.anneal_strategy");
  o.anneal_strategy = "cos";
  o.pct_start = 1.5;
  CHECK(rejected_key(o, 100, *opt) == "schedule.pct_start");
  o.pct_start = 0.3;
  o.base_momentum = {0.8, 0.8, 0.8};
  CHECK(rejected_key(o, 100, *opt) == "schedule.base_momentum");

  o = named("reduce_on_plateau");
  o.factor = 1.0;
  CHECK(rejected_key(o, 0, *opt) == "schedule.factor");
  o = named("reduce_on_plateau");
  o.mode = "minimum";
  CHECK(rejected_key(o, 0, *opt) == "schedule.mode");
  o = named("reduce_on_plateau");
  o.threshold_mode = "relative";
  CHECK(rejected_key(o, 0, *opt) == "schedule.threshold_mode");

  // A rejected schedule leaves the optimizer as it was.
  CHECK(opt->param_groups()[0].options().get_lr() == 0.1);
}

TEST_CASE("a schedule refuses an optimizer whose group count changed") {
  auto opt = make_sgd({0.1, 0.02});
  auto sched = make_scheduler(named("constant"), *opt, 0);
  opt->add_param_group(torch::optim::OptimizerParamGroup({at::zeros({1}).requires_grad_()}));
  CHECK_THROWS_WITH_AS(sched->step(), doctest::Contains("parameter groups"), Error);
}
