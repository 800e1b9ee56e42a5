// range_test (the lr range test's sweep, `host tune lr`): geometric from min_lr to max_lr over
// the run's steps, both ends exact, held at max_lr past the end, per group; bad bounds refused
// with the key.
#include "scheduler_test_util.h"

using namespace tp;
using namespace tp::test;

namespace {

SchedulerOptions range_test(std::vector<double> min_lr, std::vector<double> max_lr) {
  SchedulerOptions o = named("range_test");
  o.min_lr = std::move(min_lr);
  o.max_lr = std::move(max_lr);
  return o;
}

}  // namespace

TEST_CASE("range_test sweeps each group geometrically between its bounds, ends exact") {
  auto opt = make_sgd({0.1, 0.02}); // the groups' own lrs are replaced
  auto sched = make_scheduler(range_test({1e-7, 2e-8}, {10.0, 2.0}), *opt, 100);
  CHECK(sched->name() == "range_test");
  const Rows rows = record(*sched, *opt, 100).rows;
  REQUIRE(rows.size() == 101);
  CHECK(rows[0] == std::vector<double>{1e-7, 2e-8});
  CHECK(rows[99] == std::vector<double>{10.0, 2.0}); // the last trained step
  CHECK(rows[100] == std::vector<double>{10.0, 2.0}); // held past the end
  const double ratio = std::pow(1e8, 1.0 / 99.0);
  for (std::size_t k = 1; k < 100; ++k) {
    INFO("step " << k);
    CHECK(rows[k][0] == doctest::Approx(1e-7 * std::pow(1e8, static_cast<double>(k) / 99.0)).epsilon(1e-14));
    CHECK(rows[k][0] / rows[k - 1][0] == doctest::Approx(ratio).epsilon(1e-12));
    CHECK(rows[k][1] == doctest::Approx(rows[k][0] / 5.0).epsilon(1e-14));
    CHECK(rows[k][0] == range_test_lr(1e-7, 10.0, 100, static_cast<int64_t>(k)));
  }
}

TEST_CASE("range_test refuses bounds that do not rise and runs shorter than 2 steps, naming the key") {
  auto opt = make_sgd({0.1});
  const auto key_of = [&](const SchedulerOptions& o, int64_t total) {
    try {
      make_scheduler(o, *opt, total);
    } catch (const ConfigError& e) {
      return e.key_path();
    }
    return std::string("(accepted)");
  };
  CHECK(key_of(range_test({0.0}, {1.0}), 10) == "schedule.min_lr");
  CHECK(key_of(range_test({1e-3}, {1e-4}), 10) == "schedule.max_lr");
  CHECK(key_of(range_test({1e-3}, {}), 10) == "schedule.max_lr");
  CHECK(key_of(range_test({1e-3}, {1.0}), 1) == "schedule.name");
  CHECK(key_of(range_test({1e-3}, {1.0}), 2) == "(accepted)");
}
