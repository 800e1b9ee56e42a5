// schedule.interval = "epoch" against torch.optim.lr_scheduler stepped once per epoch (Lightning's
// default interval="epoch"), read at every optimizer step; warmup_epochs under interval "step";
// a resume mid-epoch; and the refusals of keys that mix units.
#include "scheduler_test_util.h"

using namespace tp;
using namespace tp::test;

namespace {

// 10 epochs × 37 batches per rank with grad_accum_steps 4: 10 optimizer steps an epoch, the last
// one a short window of 1 batch.
const int64_t kPerEpoch = total_optimizer_steps(1, 37, 4);
const int64_t kEpochs = 10;

// Python: the lrs of every optimizer step when the schedule is stepped once per epoch, as
// Lightning does with interval="epoch" (scheduler.step() after the epoch's last optimizer step).
const char* kPerEpochRunner = R"PY(
def run_epochs(name, opt, make, epochs, per_epoch, steps=None):
    print("case", name)
    sched = make(opt)
    steps = epochs * per_epoch if steps is None else steps
    for k in range(steps):
        row(opt, False)
        opt.step()
        if (k + 1) % per_epoch == 0:
            sched.step()
)PY";

SchedulerOptions per_epoch(std::string name) {
  SchedulerOptions o = named(std::move(name));
  o.interval = "epoch";
  return o;
}

// The lrs each of `steps` optimizer steps trains with (read before step(), as the trainer does).
Rows trained_lrs(LrScheduler& sched, int64_t steps) {
  Rows rows;
  for (int64_t k = 0; k < steps; ++k) {
    rows.push_back(sched.lrs());
    sched.step();
  }
  return rows;
}

}  // namespace

TEST_CASE("interval \"epoch\" equals torch's schedules stepped once per epoch, at every optimizer step") {
  REQUIRE(kPerEpoch == 10);
  auto oracle = run_oracle(kPerEpochRunner + std::string(R"PY(
run_epochs("cosine", sgd([0.1, 0.02]), lambda o: L.CosineAnnealingLR(o, T_max=10, eta_min=1e-4), 10, 10)
run_epochs("step", sgd([0.1, 0.02]), lambda o: L.StepLR(o, step_size=3, gamma=0.5), 10, 10)
run_epochs("multistep", adamw([0.003, 0.0005]), lambda o: L.MultiStepLR(o, [2, 5, 5, 8], gamma=0.3), 10, 10)
run_epochs("exponential", sgd([0.1, 0.02]), lambda o: L.ExponentialLR(o, gamma=0.8), 10, 10)
def hf_linear(w, T):
    return lambda s: s / w if s < w else max(0.0, (T - s) / max(1, T - w))
run_epochs("linear_warmup", sgd([0.1, 0.02]), lambda o: L.LambdaLR(o, hf_linear(2, 10)), 10, 10)
run_epochs("cosine_cut", sgd([0.1, 0.02]), lambda o: L.CosineAnnealingLR(o, T_max=10, eta_min=0.0), 10, 10, 95)
)PY"));
  const int64_t total = kEpochs * kPerEpoch;
  SUBCASE("CosineAnnealingLR(T_max = epochs, eta_min)") {
    auto opt = make_sgd({0.1, 0.02});
    SchedulerOptions o = per_epoch("cosine");
    o.min_lr = {1e-4};
    auto sched = make_scheduler(o, *opt, total, kPerEpoch);
    compare(trained_lrs(*sched, total), oracle["cosine"].rows, "cosine per epoch vs CosineAnnealingLR per epoch");
  }
  SUBCASE("StepLR(step_size = 3 epochs)") {
    auto opt = make_sgd({0.1, 0.02});
    SchedulerOptions o = per_epoch("step");
    o.step_size = 3;
    o.gamma = 0.5;
    auto sched = make_scheduler(o, *opt, total, kPerEpoch);
    compare(trained_lrs(*sched, total), oracle["step"].rows, "step per epoch vs StepLR per epoch");
  }
  SUBCASE("MultiStepLR(milestones in epochs, one repeated)") {
    auto opt = make_adamw({0.003, 0.0005});
    SchedulerOptions o = per_epoch("multistep");
    o.milestones = {2, 5, 5, 8};
    o.gamma = 0.3;
    auto sched = make_scheduler(o, *opt, total, kPerEpoch);
    compare(trained_lrs(*sched, total), oracle["multistep"].rows, "multistep per epoch vs MultiStepLR per epoch");
  }
  SUBCASE("ExponentialLR(gamma per epoch)") {
    auto opt = make_sgd({0.1, 0.02});
    SchedulerOptions o = per_epoch("exponential");
    o.gamma = 0.8;
    auto sched = make_scheduler(o, *opt, total, kPerEpoch);
    compare(trained_lrs(*sched, total), oracle["exponential"].rows, "exponential per epoch vs ExponentialLR");
  }
  SUBCASE("linear with warmup_epochs 2 (HF's LambdaLR over epochs)") {
    auto opt = make_sgd({0.1, 0.02});
    SchedulerOptions o = per_epoch("linear");
    o.warmup_epochs = 2;
    auto sched = make_scheduler(o, *opt, total, kPerEpoch);
    compare(trained_lrs(*sched, total), oracle["linear_warmup"].rows, "linear per epoch, warm-up 2 epochs");
  }
  SUBCASE("train.max_steps cuts the last epoch short: it keeps the curve of 10 epochs") {
    auto opt = make_sgd({0.1, 0.02});
    auto sched = make_scheduler(per_epoch("cosine"), *opt, 95, kPerEpoch);
    compare(trained_lrs(*sched, 95), oracle["cosine_cut"].rows, "cosine per epoch, 95 of 100 steps");
  }
}

TEST_CASE("warmup_epochs under interval \"step\" is warmup_steps = epochs × steps per epoch, bit for bit") {
  for (const std::string name : {"linear", "cosine"}) {
    INFO(name);
    auto opt_a = make_sgd({0.1, 0.02});
    SchedulerOptions a = named(name);
    a.warmup_epochs = 2;
    a.min_lr = {1e-4};
    auto by_epochs = make_scheduler(a, *opt_a, kEpochs * kPerEpoch, kPerEpoch);
    auto opt_b = make_sgd({0.1, 0.02});
    SchedulerOptions b = named(name);
    b.warmup_steps = 2 * kPerEpoch;
    b.min_lr = {1e-4};
    auto by_steps = make_scheduler(b, *opt_b, kEpochs * kPerEpoch);
    CHECK(trained_lrs(*by_epochs, 100) == trained_lrs(*by_steps, 100));
  }
}

TEST_CASE("a per-epoch schedule resumed mid-epoch trains every later step at the same lr") {
  for (const std::string name : {"cosine", "step", "multistep", "exponential", "linear", "one_cycle"}) {
    INFO(name);
    SchedulerOptions o = per_epoch(name);
    o.warmup_epochs = name == "cosine" || name == "linear" ? 2 : 0;
    o.warmup_prefix = name != "cosine";
    o.step_size = 2;
    o.milestones = {2, 4};
    o.gamma = 0.7;
    o.max_lr = {0.1, 0.02};
    auto opt_a = make_sgd({0.1, 0.02});
    auto a = make_scheduler(o, *opt_a, 100, kPerEpoch);
    (void)trained_lrs(*a, 37);  // in the middle of epoch 3 (0-based; steps 30 to 39)
    const std::vector<double> saved = a->state();
    const Rows uninterrupted = trained_lrs(*a, 63);

    auto opt_b = make_sgd({0.1, 0.02});
    auto b = make_scheduler(o, *opt_b, 100, kPerEpoch);
    b->load_state(saved);
    CHECK(b->steps_taken() == 37);
    CHECK(trained_lrs(*b, 63) == uninterrupted);
    CHECK(uninterrupted[2] == uninterrupted[0]);  // steps 37 and 39 (0-based) are epoch 3's
    CHECK(uninterrupted[3] != uninterrupted[2]);  // step 40 starts epoch 4
  }
}

TEST_CASE("a checkpoint of the other interval, or of other epochs, is refused naming the key") {
  SchedulerOptions o = named("cosine");
  auto opt = make_sgd({0.1});
  const auto by_step = make_scheduler(o, *opt, 100, kPerEpoch)->state();
  auto epoch_opt = make_sgd({0.1});
  auto by_epoch = make_scheduler(per_epoch("cosine"), *epoch_opt, 100, kPerEpoch);
  CHECK_THROWS_WITH_AS(by_epoch->load_state(by_step), doctest::Contains("schedule.interval: the checkpoint's schedule changed the lr once per optimizer step"), ConfigError);
  auto step_opt = make_sgd({0.1});
  CHECK_THROWS_WITH_AS(make_scheduler(o, *step_opt, 100, kPerEpoch)->load_state(by_epoch->state()),
                       doctest::Contains("resume with the schedule.interval"), ConfigError);
  // 100 steps as 20 epochs of 5: the same total, other epoch boundaries.
  auto other_opt = make_sgd({0.1});
  auto other = make_scheduler(per_epoch("cosine"), *other_opt, 100, 5);
  CHECK_THROWS_WITH_AS(other->load_state(by_epoch->state()), doctest::Contains("epochs have 10 optimizer steps"), ConfigError);
}

TEST_CASE("keys that mix units or do not apply are refused, naming the key and what to do") {
  const auto refusal = [](SchedulerOptions o, int64_t total = 100) {
    auto opt = make_sgd({0.1});
    try {
      (void)make_scheduler(o, *opt, total, kPerEpoch);
    } catch (const ConfigError& e) {
      return e.key_path() + " | " + e.what();
    }
    return std::string("accepted");
  };
  SchedulerOptions o = per_epoch("cosine");
  o.warmup_steps = 5;
  CHECK(refusal(o).find("schedule.warmup_steps | schedule.warmup_steps: counts optimizer steps") == 0);
  CHECK(refusal(o).find("schedule.warmup_epochs = N") != std::string::npos);
  o = named("cosine");
  o.warmup_steps = 5;
  o.warmup_epochs = 1;
  CHECK(refusal(o).find("schedule.warmup_epochs | ") == 0);
  o = named("step");
  o.step_size = 3;
  o.warmup_epochs = 1;
  CHECK(refusal(o).find("only the linear, cosine and polynomial schedules warm up") != std::string::npos);
  o.warmup_epochs = 0;
  o.cooldown_epochs = 1;
  CHECK(refusal(o).find("schedule.cooldown_epochs | ") == 0);
  // torchvision's detection recipe written down (warm-up, then MultiStepLR): the warm-up ran on no
  // schedule but linear, cosine and polynomial, silently (dense trial F2).
  o = named("multistep");
  o.milestones = {3};
  o.warmup_steps = 2;
  CHECK(refusal(o).find("schedule.warmup_steps | schedule.warmup_steps: only the linear, cosine and polynomial schedules warm up") == 0);
  o.warmup_steps = 0;
  o.warmup_start_factor = 0.001;
  CHECK(refusal(o).find("schedule.warmup_start_factor | ") == 0);
  // torchvision's segmentation recipe: a LinearLR warm-up, then PolynomialLR.
  o = named("polynomial");
  o.warmup_steps = 10;
  o.warmup_start_factor = 0.01;
  CHECK(refusal(o) == "accepted");
  // The polynomial decay's shape keys on another schedule (the review).
  o = named("cosine");
  o.power = 0.9;
  CHECK(refusal(o).find("schedule.power | schedule.power: shapes the polynomial schedule only") == 0);
  o.power = 1.0;
  o.total_iters = 50;
  CHECK(refusal(o).find("schedule.total_iters | ") == 0);
  o = per_epoch("range_test");
  o.min_lr = {1e-5};
  o.max_lr = {1.0};
  CHECK(refusal(o).find("schedule.interval | ") == 0);
  o = named("cosine");
  o.warmup_epochs = 11;
  CHECK(refusal(o).find("schedule.warmup_epochs | schedule.warmup_epochs: must be at most the run's length, got 11 epochs (110 optimizer steps") == 0);
  o = per_epoch("cosine");
  o.warmup_epochs = 4;
  o.cooldown_epochs = 7;
  CHECK(refusal(o).find("schedule.cooldown_epochs | ") == 0);
  CHECK(refusal(o).find("set train.epochs to that sum") != std::string::npos);
  o = named("cosine");
  o.warmup_steps = 5;
  o.warmup_lr = 1e-3;
  o.warmup_start_factor = 0.1;
  CHECK(refusal(o).find("schedule.warmup_lr | ") == 0);
  o.warmup_start_factor = 0;
  o.warmup_lr = 0.2;  // above optim.lr 0.1
  CHECK(refusal(o).find("must be in (0, optim.lr = 0.1]") != std::string::npos);
  // The same checks reach `host sweep`'s check of every cell before any trains.
  o = per_epoch("cosine");
  o.warmup_steps = 5;
  CHECK_THROWS_AS(check_schedule_options(o, 0.1), ConfigError);
}

TEST_CASE("warmup_lr is warmup_start_factor = warmup_lr / optim.lr, for every group alike") {
  const auto opt = make_sgd({1e-3, 1e-5});  // optim.lr 1e-3, a group decayed to 1/100
  SchedulerOptions o = named("cosine");
  o.warmup_steps = 4;
  o.warmup_lr = 1e-5;
  const SchedulerOptions fitted = options_for_groups(o, *opt, 1e-3);
  CHECK(fitted.warmup_lr == 0);
  CHECK(fitted.warmup_start_factor == 1e-5 / 1e-3);
  auto sched = make_scheduler(fitted, *opt, 20);
  CHECK(sched->lrs()[0] == doctest::Approx(1e-5).epsilon(1e-12));
  CHECK(sched->lrs()[1] == doctest::Approx(1e-7).epsilon(1e-12));
}

TEST_CASE("the log line says the unit, and fast_dev_run caps a warm-up in epochs") {
  SchedulerOptions o = per_epoch("cosine");
  o.warmup_epochs = 1;
  o.warmup_prefix = false;
  CHECK(describe_schedule(o, 9, 3) == "cosine per epoch over 3 epochs (9 optimizer steps, 3 per epoch); warm-up 1 epoch under the decay");
  CHECK(describe_schedule(named("cosine"), 70, 7) == "cosine over 70 optimizer steps");
  CHECK(fit_schedule_to_smoke_run(o, 1, 3) == "fast_dev_run: schedule.warmup_epochs = 1 is capped to the run's 1 optimizer step(s)");
  CHECK(o.interval == "step");
  CHECK(o.warmup_steps == 1);
  auto opt = make_sgd({0.1});
  CHECK_NOTHROW((void)make_scheduler(o, *opt, 1, 3));
}
