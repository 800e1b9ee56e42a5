// one_cycle against OneCycleLR: lr and momentum/beta1 of both groups at every step, the
// two- and three-phase tables, both anneal strategies, and the overrun error.
#include <torch/optim/adagrad.h>

#include "scheduler_test_util.h"

using namespace tp;
using namespace tp::test;

namespace {
const int64_t kOneCycleTotal = total_optimizer_steps(10, 37, 4);  // 100
}

TEST_CASE("one_cycle matches OneCycleLR, momentum included, and fails loudly past its total") {
  auto oracle = run_oracle(R"PY(
run("cos", sgd([0.1, 0.02]), lambda o: L.OneCycleLR(o, max_lr=[0.1, 0.05], total_steps=100), 101, momenta=True)
run("three_phase", adamw([0.1, 0.02]),
    lambda o: L.OneCycleLR(o, max_lr=0.01, total_steps=100, pct_start=0.25, three_phase=True), 100, momenta=True)
run("linear", sgd([0.1, 0.02]),
    lambda o: L.OneCycleLR(o, max_lr=[0.2, 0.04], total_steps=37, pct_start=0.4, anneal_strategy="linear",
                           div_factor=10.0, final_div_factor=100.0, base_momentum=[0.8, 0.85],
                           max_momentum=[0.9, 0.95]), 37, momenta=True)
run("three_phase_linear_odd", sgd([0.1, 0.02]),
    lambda o: L.OneCycleLR(o, max_lr=0.3, total_steps=7, pct_start=0.3, three_phase=True,
                           anneal_strategy="linear"), 8, momenta=True)
run("no_momentum_cycle", sgd([0.1, 0.02], momentum=0.5),
    lambda o: L.OneCycleLR(o, max_lr=0.1, total_steps=20, cycle_momentum=False), 20, momenta=True)
run("zero_phase", sgd([0.1, 0.02]), lambda o: L.OneCycleLR(o, max_lr=0.1, total_steps=10, pct_start=0.1), 10)
)PY");

  SUBCASE("two-phase cos on SGD, per-group max_lr; step 101 raises in both") {
    SchedulerOptions o = named("one_cycle");
    o.max_lr = {0.1, 0.05};
    auto opt = make_sgd({0.1, 0.02});
    auto sched = make_scheduler(o, *opt, kOneCycleTotal);
    auto ours = record(*sched, *opt, kOneCycleTotal + 1, /*momenta=*/true);
    compare(ours.rows, oracle["cos"].rows, "one_cycle cos, two-phase (lr + momentum)");
    CHECK(oracle["cos"].error.find("ValueError") == 0);  // PyTorch also refuses call 101
    CHECK(ours.error.find("OneCycleLR ran past its total of 100 steps") == 0);
    CHECK(ours.error.find("grad_accum_steps") != std::string::npos);
    MESSAGE("overrun: ", ours.error, "\nPyTorch: ", oracle["cos"].error);
    // The refused step changed nothing.
    CHECK(sched->steps_taken() == kOneCycleTotal);
    CHECK(row_of(*sched, *opt, true) == ours.rows.back());
  }
  SUBCASE("three-phase on AdamW cycles beta1") {
    SchedulerOptions o = named("one_cycle");
    o.max_lr = {0.01};
    o.pct_start = 0.25;
    o.three_phase = true;
    auto opt = make_adamw({0.1, 0.02});
    auto sched = make_scheduler(o, *opt, kOneCycleTotal);
    compare(record(*sched, *opt, kOneCycleTotal, true).rows, oracle["three_phase"].rows, "one_cycle three-phase (lr + beta1)");
  }
  SUBCASE("linear anneal, per-group momenta, non-default factors") {
    SchedulerOptions o = named("one_cycle");
    o.max_lr = {0.2, 0.04};
    o.pct_start = 0.4;
    o.anneal_strategy = "linear";
    o.div_factor = 10.0;
    o.final_div_factor = 100.0;
    o.base_momentum = {0.8, 0.85};
    o.max_momentum = {0.9, 0.95};
    auto opt = make_sgd({0.1, 0.02});
    auto sched = make_scheduler(o, *opt, 37);
    compare(record(*sched, *opt, 37, true).rows, oracle["linear"].rows, "one_cycle linear (lr + momentum)");
  }
  SUBCASE("three-phase linear over 7 steps (fractional phase ends)") {
    SchedulerOptions o = named("one_cycle");
    o.max_lr = {0.3};
    o.three_phase = true;
    o.anneal_strategy = "linear";
    auto opt = make_sgd({0.1, 0.02});
    auto sched = make_scheduler(o, *opt, 7);
    auto ours = record(*sched, *opt, 8, true);
    compare(ours.rows, oracle["three_phase_linear_odd"].rows, "one_cycle three-phase linear, 7 steps");
    CHECK(!ours.error.empty());
    CHECK(!oracle["three_phase_linear_odd"].error.empty());
  }
  SUBCASE("cycle_momentum = false leaves momentum alone") {
    SchedulerOptions o = named("one_cycle");
    o.max_lr = {0.1};
    o.cycle_momentum = false;
    auto opt = make_sgd({0.1, 0.02}, 0.5);
    auto sched = make_scheduler(o, *opt, 20);
    compare(record(*sched, *opt, 20, true).rows, oracle["no_momentum_cycle"].rows, "one_cycle without momentum cycling");
  }
  SUBCASE("a zero-length phase is refused up front; PyTorch divides by zero there") {
    CHECK(oracle["zero_phase"].error.find("ZeroDivisionError") == 0);
    SchedulerOptions o = named("one_cycle");
    o.max_lr = {0.1};
    o.pct_start = 0.1;
    auto opt = make_sgd({0.1, 0.02});
    CHECK_THROWS_WITH_AS(make_scheduler(o, *opt, 10), doctest::Contains("zero length"), ConfigError);
  }
}

TEST_CASE("one_cycle refuses to cycle momentum on an optimizer without momentum or beta1") {
  std::vector<at::Tensor> params{at::zeros({1}).requires_grad_()};
  torch::optim::Adagrad opt(params, torch::optim::AdagradOptions(0.01));
  SchedulerOptions o = named("one_cycle");
  o.max_lr = {0.1};
  try {
    make_scheduler(o, opt, 10);
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    CHECK(e.key_path() == "schedule.cycle_momentum");
  }
  o.cycle_momentum = false;
  CHECK_NOTHROW(make_scheduler(o, opt, 10));
}
