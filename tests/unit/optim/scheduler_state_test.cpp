// state()/load_state(): a schedule restored mid-run into a fresh optimizer continues exactly
// (bit for bit) as the uninterrupted one, and a state from another schedule is refused.
#include "scheduler_test_util.h"

using namespace tp;
using namespace tp::test;

namespace {

const int64_t kSchedulerStateTotal = total_optimizer_steps(10, 37, 4);  // 100
const int64_t kSaveAt = 37;

SchedulerOptions option_set(const std::string& name) {
  SchedulerOptions o = named(name);
  o.step_size = 9;
  o.gamma = 0.7;
  o.milestones = {5, 40, 60};
  if (name == "linear" || name == "cosine") o.warmup_steps = 10; // the others refuse a warm-up
  o.min_lr = {1e-4};
  o.max_lr = {0.1, 0.05};
  o.three_phase = name == "one_cycle";
  return o;
}

}  // namespace

TEST_CASE("a restored schedule continues exactly like the uninterrupted one") {
  for (const char* name : {"constant", "step", "multistep", "exponential", "linear", "cosine", "one_cycle"}) {
    for (bool adamw : {false, true}) {
      INFO(name, adamw ? " on AdamW" : " on SGD");
      const auto optimizer = [&] { return adamw ? make_adamw({0.1, 0.02}) : make_sgd({0.1, 0.02}); };
      const SchedulerOptions o = option_set(name);

      auto opt_a = optimizer();
      auto a = make_scheduler(o, *opt_a, kSchedulerStateTotal);
      for (int64_t i = 0; i < kSaveAt; ++i) a->step();
      const std::vector<double> saved = a->state();
      const Rows uninterrupted = record(*a, *opt_a, kSchedulerStateTotal - kSaveAt, true).rows;

      auto opt_b = optimizer();
      auto b = make_scheduler(o, *opt_b, kSchedulerStateTotal);
      b->load_state(saved);
      CHECK(b->steps_taken() == kSaveAt);
      CHECK(b->state() == saved);
      CHECK(record(*b, *opt_b, kSchedulerStateTotal - kSaveAt, true).rows == uninterrupted);
    }
  }
}

TEST_CASE("a restored reduce_on_plateau keeps its best value, patience and cooldown counters") {
  const std::vector<double> metrics = {1.0, 0.9, 0.95, 0.95, 0.95, 0.8, 0.85, 0.85, 0.85, 0.85, 0.85, 0.85};
  SchedulerOptions o = named("reduce_on_plateau");
  o.patience = 2;
  o.cooldown = 2;
  o.factor = 0.5;
  auto opt_a = make_sgd({0.1, 0.02});
  auto a = make_scheduler(o, *opt_a, 0);
  Rows uninterrupted;
  std::vector<double> saved;
  for (size_t i = 0; i < metrics.size(); ++i) {
    if (i == 4) saved = a->state();  // mid-patience: two bad evaluations counted
    a->step();
    a->step_metric(metrics[i]);
    if (i >= 4) uninterrupted.push_back(a->lrs());
  }
  auto opt_b = make_sgd({0.1, 0.02});
  auto b = make_scheduler(o, *opt_b, 0);
  b->load_state(saved);
  Rows resumed;
  for (size_t i = 4; i < metrics.size(); ++i) {
    b->step();
    b->step_metric(metrics[i]);
    resumed.push_back(b->lrs());
  }
  CHECK(resumed == uninterrupted);
  CHECK(uninterrupted.front() != uninterrupted.back());  // the sequence did reduce the lr
}

TEST_CASE("load_state refuses a state of another kind, group count or total") {
  auto opt = make_sgd({0.1, 0.02});
  auto cosine = make_scheduler(option_set("cosine"), *opt, kSchedulerStateTotal);
  const auto state = cosine->state();

  auto linear_opt = make_sgd({0.1, 0.02});
  auto linear = make_scheduler(option_set("linear"), *linear_opt, kSchedulerStateTotal);
  // A changed configuration: a configuration error (exit 2), as the resume's other refusals.
  CHECK_THROWS_WITH_AS(linear->load_state(state), doctest::Contains("another schedule kind"), ConfigError);

  auto longer_opt = make_sgd({0.1, 0.02});
  auto longer = make_scheduler(option_set("cosine"), *longer_opt, kSchedulerStateTotal + 10);
  CHECK_THROWS_WITH_AS(longer->load_state(state), doctest::Contains("optimizer steps"), ConfigError);

  auto three_opt = make_sgd({0.1, 0.02, 0.03});
  auto three = make_scheduler(option_set("cosine"), *three_opt, kSchedulerStateTotal);
  CHECK_THROWS_WITH_AS(three->load_state(state), doctest::Contains("parameter groups"), Error);

  CHECK_THROWS_AS(cosine->load_state({}), Error);
  auto truncated = state;
  truncated.pop_back();
  CHECK_THROWS_AS(cosine->load_state(truncated), Error);
}
