// "polynomial" (torch.optim.lr_scheduler.PolynomialLR, torchvision's segmentation reference and
// smp's examples) against PolynomialLR itself (its recursive step()), its closed form as a
// LambdaLR, torchvision's SequentialLR(LinearLR, PolynomialLR) warm-up, a min_lr floor and a
// resume mid-run; every value to a relative tolerance, the largest difference reported.
#include "scheduler_test_util.h"

using namespace tp;
using namespace tp::test;

namespace {

/// The largest |ours - theirs| / |theirs| (absolute where theirs is 0); checks the shapes.
double max_relative(const Rows& ours, const Rows& theirs, const std::string& what) {
  INFO(what);
  REQUIRE(ours.size() == theirs.size());
  double worst = 0;
  for (size_t r = 0; r < ours.size(); ++r) {
    REQUIRE(ours[r].size() == theirs[r].size());
    for (size_t c = 0; c < ours[r].size(); ++c) {
      const double diff = std::fabs(ours[r][c] - theirs[r][c]);
      worst = std::max(worst, theirs[r][c] != 0 ? diff / std::fabs(theirs[r][c]) : diff);
    }
  }
  MESSAGE(what, ": ", ours.size(), " steps, max relative difference ", worst);
  return worst;
}

SchedulerOptions polynomial(double power, int64_t total_iters = 0, std::vector<double> min_lr = {0.0}) {
  SchedulerOptions o = named("polynomial");
  o.power = power;
  o.total_iters = total_iters;
  o.min_lr = std::move(min_lr);
  return o;
}

// PolynomialLR's step() multiplies the current lr by a ratio of two powers; ours is the closed
// form. The two differ by rounding only: at most 1.3e-15 relative over these runs (the warm-up
// case: LinearLR is recursive too).
constexpr double kRecursiveTolerance = 2e-15;

}  // namespace

TEST_CASE("polynomial matches PolynomialLR step for step, and its closed form") {
  auto oracle = run_oracle(R"PY(
def poly(base, m, w, f0, T, p):
    def f(s):
        if s < w:
            return f0 + (1.0 - f0) * (s / w)
        t = min(s - w, max(1, T - w))
        return (m + (base - m) * (1.0 - t / max(1, T - w)) ** p) / base
    return f

run("power09", sgd([0.02, 0.005]), lambda o: L.PolynomialLR(o, total_iters=100, power=0.9), 103)
run("power09_closed", sgd([0.02, 0.005]), lambda o: L.LambdaLR(o, [poly(0.02, 0.0, 0, 0.0, 100, 0.9),
                                                                   poly(0.005, 0.0, 0, 0.0, 100, 0.9)]), 103)
run("power1_iters40", adamw([0.003, 0.0005]), lambda o: L.PolynomialLR(o, total_iters=40), 60)
run("power2", sgd([0.1, 0.01]), lambda o: L.PolynomialLR(o, total_iters=37, power=2.0), 37)
run("torchvision", sgd([0.02, 0.002]), lambda o: L.SequentialLR(o, [L.LinearLR(o, start_factor=0.01, total_iters=10),
    L.PolynomialLR(o, total_iters=90, power=0.9)], milestones=[10]), 100)
run("floor", sgd([0.1, 0.02]), lambda o: L.LambdaLR(o, [poly(0.1, 1e-3, 0, 0.0, 50, 0.9),
                                                         poly(0.02, 1e-4, 0, 0.0, 50, 0.9)]), 53)
)PY");

  SUBCASE("power 0.9 over the run (total_iters 0), held at 0 past the end") {
    auto opt = make_sgd({0.02, 0.005});
    auto sched = make_scheduler(polynomial(0.9), *opt, 100);
    const Rows ours = record(*sched, *opt, 103).rows;
    CHECK(max_relative(ours, oracle["power09"].rows, "polynomial vs PolynomialLR(100, 0.9)") <= kRecursiveTolerance);
    CHECK(max_relative(ours, oracle["power09_closed"].rows, "polynomial vs its closed form") == 0.0);
    CHECK(ours[100] == std::vector<double>{0.0, 0.0});
    CHECK(ours[102] == std::vector<double>{0.0, 0.0});
  }
  SUBCASE("PyTorch's default power 1.0, total_iters 40 of a 60-step run") {
    auto opt = make_adamw({0.003, 0.0005});
    auto sched = make_scheduler(polynomial(1.0, 40), *opt, 60);
    CHECK(max_relative(record(*sched, *opt, 60).rows, oracle["power1_iters40"].rows, "PolynomialLR(40, 1.0)") <=
          kRecursiveTolerance);
  }
  SUBCASE("power 2") {
    auto opt = make_sgd({0.1, 0.01});
    auto sched = make_scheduler(polynomial(2.0), *opt, 37);
    CHECK(max_relative(record(*sched, *opt, 37).rows, oracle["power2"].rows, "PolynomialLR(37, 2.0)") <=
          kRecursiveTolerance);
  }
  SUBCASE("min_lr per group lifts the floor (mmseg's PolyLR eta_min)") {
    auto opt = make_sgd({0.1, 0.02});
    auto sched = make_scheduler(polynomial(0.9, 0, {1e-3, 1e-4}), *opt, 50);
    CHECK(max_relative(record(*sched, *opt, 53).rows, oracle["floor"].rows, "polynomial with min_lr") <= 1e-15);
  }
  SUBCASE("torchvision's warm-up: SequentialLR(LinearLR(0.01, 10), PolynomialLR(90, 0.9))") {
    // The warm-up Span as make_scheduler resolves warmup_steps; built through make_counted, the
    // dispatch under make_scheduler's refusal of warm-up keys on schedules it does not list.
    auto opt = make_sgd({0.02, 0.002});
    SchedulerOptions o = polynomial(0.9);
    o.warmup_steps = 10;
    o.warmup_start_factor = 0.01;
    tp::detail::Span span;
    span.warmup = 10;
    auto sched = tp::detail::make_counted(o, *opt, 100, span);
    CHECK(max_relative(record(*sched, *opt, 100).rows, oracle["torchvision"].rows, "torchvision's warm-up + poly") <=
          kRecursiveTolerance);
  }
}

TEST_CASE("polynomial resumes mid-run from its state to the same lrs") {
  auto opt = make_sgd({0.02, 0.005});
  auto sched = make_scheduler(polynomial(0.9), *opt, 100);
  const Rows whole = record(*sched, *opt, 100).rows;
  auto first = make_sgd({0.02, 0.005});
  auto before = make_scheduler(polynomial(0.9), *first, 100);
  for (int i = 0; i < 37; ++i) before->step();
  auto second = make_sgd({0.02, 0.005});
  auto after = make_scheduler(polynomial(0.9), *second, 100);
  after->load_state(before->state());
  const Rows rest = record(*after, *second, 63).rows;
  CHECK(Rows(whole.begin() + 37, whole.end()) == rest);
  // Another schedule's state is refused: the kind is polynomial's own.
  auto third = make_sgd({0.02, 0.005});
  auto cosine = make_scheduler(named("cosine"), *third, 100);
  CHECK_THROWS_AS(cosine->load_state(before->state()), ConfigError);
}

TEST_CASE("polynomial refuses a bad power or total_iters, naming the key") {
  auto opt = make_sgd({0.1});
  const auto refuses = [&](const SchedulerOptions& o, const char* key) {
    try {
      make_scheduler(o, *opt, 100);
      FAIL("accepted");
    } catch (const ConfigError& e) {
      CHECK(std::string(e.what()).find(std::string("schedule.") + key) != std::string::npos);
    }
  };
  refuses(polynomial(0.0), "power");
  refuses(polynomial(-1.0), "power");
  refuses(polynomial(std::nan("")), "power");
  refuses(polynomial(1.0, -3), "total_iters");
  SchedulerOptions both = polynomial(1.0, 50);
  both.cooldown_epochs = 1;
  tp::detail::Span span;
  span.cooldown = 10;
  try {
    tp::detail::make_counted(both, *opt, 100, span);
    FAIL("accepted");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("schedule.total_iters") != std::string::npos);
  }
}
