// "linear" (HF get_linear_schedule_with_warmup) and "cosine" (linear warmup, then the closed
// form of CosineAnnealingLR down to min_lr) against equivalent LambdaLR, SequentialLR and
// CosineAnnealingLR schedules, with accumulation-style totals.
#include "scheduler_test_util.h"

using namespace tp;
using namespace tp::test;

namespace {
// 10 epochs × 37 batches per rank with grad_accum_steps 4.
const int64_t kWarmupScheduleTotal = total_optimizer_steps(10, 37, 4);

std::unique_ptr<LrScheduler> warmup_decay(const std::string& name, torch::optim::Optimizer& opt, int64_t warmup,
                                          std::vector<double> min_lr = {0.0}, double start_factor = 0.0,
                                          int64_t total = kWarmupScheduleTotal) {
  SchedulerOptions o = named(name);
  o.warmup_steps = warmup;
  o.min_lr = std::move(min_lr);
  o.warmup_start_factor = start_factor;
  return make_scheduler(o, opt, total);
}
}  // namespace

TEST_CASE("linear matches get_linear_schedule_with_warmup as a LambdaLR") {
  REQUIRE(kWarmupScheduleTotal == 100);
  auto oracle = run_oracle(R"PY(
def hf_linear(w, T):
    def f(s):
        if s < w:
            return float(s) / float(max(1, w))
        return max(0.0, float(T - s) / float(max(1, T - w)))
    return f

def warm_linear(base, m, f0, w, T):
    def f(s):
        if s < w:
            return f0 + (1.0 - f0) * (s / w)
        return (m + (base - m) * max(0.0, (T - s) / max(1, T - w))) / base
    return f

run("hf", sgd([0.1, 0.02]), lambda o: L.LambdaLR(o, hf_linear(10, 100)), 103)
run("hf_no_warmup", adamw([0.003, 0.0005]), lambda o: L.LambdaLR(o, hf_linear(0, 37)), 37)
run("hf_all_warmup", sgd([0.1, 0.02]), lambda o: L.LambdaLR(o, hf_linear(12, 12)), 14)
run("floor", sgd([0.1, 0.02]), lambda o: L.LambdaLR(o, [warm_linear(0.1, 1e-3, 0.1, 10, 100),
                                                         warm_linear(0.02, 1e-4, 0.1, 10, 100)]), 103)
)PY");

  SUBCASE("warmup 10 of 100 steps, then 3 steps past the end (held at 0 like HF)") {
    auto opt = make_sgd({0.1, 0.02});
    auto sched = warmup_decay("linear", *opt, 10);
    CHECK(sched->lr() == 0.0);  // HF's warmup starts at 0: step 0 trains at lr 0
    compare(record(*sched, *opt, 103).rows, oracle["hf"].rows, "linear (warmup 10, total 100)");
  }
  SUBCASE("no warmup") {
    auto opt = make_adamw({0.003, 0.0005});
    auto sched = warmup_decay("linear", *opt, 0, {0.0}, 0.0, 37);
    compare(record(*sched, *opt, 37).rows, oracle["hf_no_warmup"].rows, "linear (no warmup, total 37)");
  }
  SUBCASE("warmup_steps == total_steps (HF's max(1, T - w) denominator)") {
    auto opt = make_sgd({0.1, 0.02});
    auto sched = warmup_decay("linear", *opt, 12, {0.0}, 0.0, 12);
    compare(record(*sched, *opt, 14).rows, oracle["hf_all_warmup"].rows, "linear (warmup == total)");
  }
  SUBCASE("warmup_start_factor and a per-group min_lr floor") {
    auto opt = make_sgd({0.1, 0.02});
    auto sched = warmup_decay("linear", *opt, 10, {1e-3, 1e-4}, 0.1);
    compare(record(*sched, *opt, 103).rows, oracle["floor"].rows, "linear (start factor 0.1, min_lr per group)");
  }
}

TEST_CASE("cosine matches the closed form, and SequentialLR(LinearLR, CosineAnnealingLR) to 1e-12") {
  auto oracle = run_oracle(R"PY(
def warm_cos(base, m, f0, w, T):
    def f(s):
        if s < w:
            return f0 + (1.0 - f0) * (s / w)
        t = min(s - w, max(1, T - w))
        return (m + (base - m) * (1 + math.cos(math.pi * t / max(1, T - w))) / 2) / base
    return f

def seq(f0, w, T, m):
    return lambda o: L.SequentialLR(o, [L.LinearLR(o, start_factor=f0, total_iters=w),
                                        L.CosineAnnealingLR(o, T_max=T - w, eta_min=m)], milestones=[w])

run("lambda", sgd([0.1, 0.02]), lambda o: L.LambdaLR(o, [warm_cos(0.1, 1e-4, 0.0, 10, 100),
                                                         warm_cos(0.02, 1e-4, 0.0, 10, 100)]), 103)
run("lambda_f0", sgd([0.1, 0.02]), lambda o: L.LambdaLR(o, [warm_cos(0.1, 1e-4, 0.1, 10, 100),
                                                            warm_cos(0.02, 1e-4, 0.1, 10, 100)]), 100)
run("sequential", sgd([0.1, 0.02]), seq(0.1, 10, 100, 1e-4), 100)
run("annealing", adamw([0.003, 0.0005]), lambda o: L.CosineAnnealingLR(o, T_max=100, eta_min=1e-5), 100)
run("annealing_closed", adamw([0.003, 0.0005]), lambda o: L.LambdaLR(o, [warm_cos(0.003, 1e-5, 0.0, 0, 100),
                                                                        warm_cos(0.0005, 1e-5, 0.0, 0, 100)]), 100)
run("per_group_min", adamw([0.003, 0.0005]), lambda o: L.LambdaLR(o, [warm_cos(0.003, 3e-5, 0.0, 7, 37),
                                                                     warm_cos(0.0005, 0.0, 0.0, 7, 37)]), 37)
)PY");

  SUBCASE("warmup from 0 (LambdaLR), min_lr 1e-4, held at min_lr past the end") {
    auto opt = make_sgd({0.1, 0.02});
    auto sched = warmup_decay("cosine", *opt, 10, {1e-4});
    auto trace = record(*sched, *opt, 103);
    compare(trace.rows, oracle["lambda"].rows, "cosine vs LambdaLR closed form (warmup 10, total 100)");
    CHECK(trace.rows[100] == std::vector<double>{1e-4, 1e-4});  // exactly min_lr at the last step
  }
  SUBCASE("warmup_start_factor 0.1 vs LambdaLR and vs SequentialLR(LinearLR, CosineAnnealingLR)") {
    auto opt = make_sgd({0.1, 0.02});
    auto sched = warmup_decay("cosine", *opt, 10, {1e-4}, 0.1);
    auto ours = record(*sched, *opt, kWarmupScheduleTotal).rows;
    compare(ours, oracle["lambda_f0"].rows, "cosine vs LambdaLR closed form (start factor 0.1)");
    compare(ours, oracle["sequential"].rows, "cosine vs SequentialLR(LinearLR, CosineAnnealingLR)");
    // How far PyTorch's recursive CosineAnnealingLR drifts from its documented closed form.
    compare(oracle["sequential"].rows, oracle["lambda_f0"].rows, "PyTorch recursive vs closed form");
  }
  SUBCASE("no warmup vs CosineAnnealingLR itself (its recursive formula)") {
    auto opt = make_adamw({0.003, 0.0005});
    auto sched = warmup_decay("cosine", *opt, 0, {1e-5});
    auto ours = record(*sched, *opt, kWarmupScheduleTotal).rows;
    compare(ours, oracle["annealing"].rows, "cosine vs CosineAnnealingLR (no warmup)");
    compare(ours, oracle["annealing_closed"].rows, "cosine vs CosineAnnealingLR closed form (no warmup)");
  }
  SUBCASE("per-group min_lr") {
    auto opt = make_adamw({0.003, 0.0005});
    auto sched = warmup_decay("cosine", *opt, 7, {3e-5, 0.0}, 0.0, 37);
    compare(record(*sched, *opt, 37).rows, oracle["per_group_min"].rows, "cosine (min_lr per group, total 37)");
  }
}

// A fine-tuning trial with layer decay and min_lr 1e-5: the stem's lr (1.95e-7 after warm-up) rose
// to 9.93e-6 during the "decay", where timm, multiplying each group's lr_scale into the whole
// schedule, ends it at 2.1e-8.
TEST_CASE("one min_lr scales with each group as its lr does (timm's lr_scale); a list is taken as written") {
  const auto opt = tp::test::make_sgd({1e-3, 1e-5}, 0.0);  // optim.lr 1e-3; a group decayed to 1/100
  SchedulerOptions o = tp::test::named("cosine");
  o.warmup_steps = 2;
  o.min_lr = {1e-4};
  const SchedulerOptions fitted = tp::options_for_groups(o, *opt, 1e-3);
  REQUIRE(fitted.min_lr.size() == 2);
  CHECK(fitted.min_lr[0] == 1e-4);  // a group at optim.lr keeps min_lr exactly
  CHECK(fitted.min_lr[1] == doctest::Approx(1e-6).epsilon(1e-12));
  auto sched = tp::make_scheduler(fitted, *opt, 20);
  const tp::test::Trace trace = tp::test::record(*sched, *opt, 20);
  // Every step keeps the groups' ratio: the decayed group falls, never rises, and ends at 1e-6.
  for (std::size_t s = 2; s < trace.rows.size(); ++s) {
    CHECK(trace.rows[s][1] == doctest::Approx(trace.rows[s][0] / 100).epsilon(1e-9));
    if (s > 2) CHECK(trace.rows[s][1] <= trace.rows[s - 1][1]);
  }
  CHECK(trace.rows.back()[1] == doctest::Approx(1e-6).epsilon(1e-9));
  o.min_lr = {1e-4, 3e-6};  // one per group: as given
  CHECK(tp::options_for_groups(o, *opt, 1e-3).min_lr == std::vector<double>{1e-4, 3e-6});
}
