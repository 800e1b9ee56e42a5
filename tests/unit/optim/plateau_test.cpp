// reduce_on_plateau against ReduceLROnPlateau on fixed metric sequences.
#include "scheduler_test_util.h"

using namespace tp;
using namespace tp::test;

namespace {

std::string py_list(const std::vector<double>& values) {
  std::string out = "[";
  for (double v : values) out += py(v) + ", ";
  return out + "]";
}

// Evaluates `metrics` in order, with a few optimizer steps before each (they must not move the
// lr); one row per evaluation plus the initial one.
Rows drive(LrScheduler& sched, const std::vector<double>& metrics) {
  Rows rows{sched.lrs()};
  for (double m : metrics) {
    for (int i = 0; i < 3; ++i) sched.step();
    sched.step_metric(m);
    rows.push_back(sched.lrs());
  }
  return rows;
}

const std::vector<double> kLosses = {1.0,  0.9,    0.95, 0.95, 0.95, 0.95, 0.89, 0.89991, 0.89, 0.89, 0.89,
                                     0.89, 0.5,    0.5,  0.5,  0.5,  0.5,  0.5,  0.5,     0.5,  0.5,  0.5,
                                     0.5,  NAN,    NAN,  NAN,  0.4,  0.4,  0.4,  0.4,     0.4,  0.4};
const std::vector<double> kAccuracies = {0.1, 0.2,  0.205, 0.21, 0.21, 0.3,  0.3, 0.305, 0.31,
                                         0.3, 0.29, 0.4,   0.4,  0.4,  0.41, 0.4, 0.4,   0.4};

}  // namespace

TEST_CASE("reduce_on_plateau matches ReduceLROnPlateau evaluation by evaluation") {
  auto oracle = run_oracle(
      "losses = " + py_list(kLosses) + "\naccs = " + py_list(kAccuracies) + R"PY(
o = sgd([0.1, 0.02])
run_metrics("min_rel", o, L.ReduceLROnPlateau(o, mode="min", factor=0.5, patience=2, cooldown=1,
                                              min_lr=[0.01, 0.004]), losses)
o = adamw([0.1, 0.02])
run_metrics("max_abs", o, L.ReduceLROnPlateau(o, mode="max", factor=0.3, patience=0, threshold=0.01,
                                              threshold_mode="abs", cooldown=2, min_lr=1e-3), accs)
o = sgd([0.1, 0.02])
run_metrics("defaults", o, L.ReduceLROnPlateau(o), losses)
o = sgd([0.1, 0.02])
run_metrics("eps", o, L.ReduceLROnPlateau(o, factor=0.9, patience=0, eps=0.004), losses)
)PY");

  SUBCASE("min / rel, patience 2, cooldown 1, per-group floor; NaN counts as bad") {
    SchedulerOptions o = named("reduce_on_plateau");
    o.factor = 0.5;
    o.patience = 2;
    o.cooldown = 1;
    o.min_lr = {0.01, 0.004};
    auto opt = make_sgd({0.1, 0.02});
    auto sched = make_scheduler(o, *opt, 0);
    compare(drive(*sched, kLosses), oracle["min_rel"].rows, "reduce_on_plateau min/rel");
    CHECK(sched->steps_taken() == 3 * static_cast<int64_t>(kLosses.size()));
  }
  SUBCASE("max / abs, patience 0, cooldown 2") {
    SchedulerOptions o = named("reduce_on_plateau");
    o.mode = "max";
    o.factor = 0.3;
    o.patience = 0;
    o.threshold = 0.01;
    o.threshold_mode = "abs";
    o.cooldown = 2;
    o.min_lr = {1e-3};
    auto opt = make_adamw({0.1, 0.02});
    auto sched = make_scheduler(o, *opt, 0);
    compare(drive(*sched, kAccuracies), oracle["max_abs"].rows, "reduce_on_plateau max/abs");
  }
  SUBCASE("PyTorch's defaults") {
    auto opt = make_sgd({0.1, 0.02});
    auto sched = make_scheduler(named("reduce_on_plateau"), *opt, 0);
    compare(drive(*sched, kLosses), oracle["defaults"].rows, "reduce_on_plateau defaults");
  }
  SUBCASE("a reduction smaller than eps is skipped per group") {
    SchedulerOptions o = named("reduce_on_plateau");
    o.factor = 0.9;
    o.patience = 0;
    o.eps = 0.004;
    auto opt = make_sgd({0.1, 0.02});
    auto sched = make_scheduler(o, *opt, 0);
    compare(drive(*sched, kLosses), oracle["eps"].rows, "reduce_on_plateau eps");
  }
}
