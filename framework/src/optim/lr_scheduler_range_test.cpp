// range_test: the learning-rate range test's exponential sweep (Leslie Smith; fastai's and
// Lightning's lr_find), which `host tune lr` trains with: every group's lr rises geometrically from
// its min_lr at step 0 to its max_lr at the last step, then holds there. A closed form of the step
// count, like the warmup schedules, so it resumes from the count alone.
#include <torch/optim/optimizer.h>

#include <cmath>

#include "tp/framework/error.h"
#include "tp/framework/optim/lr_scheduler.h"

namespace tp {
namespace {

class RangeTestSchedule : public LrScheduler {
 public:
  RangeTestSchedule(torch::optim::Optimizer& opt, const SchedulerOptions& o, int64_t total_steps)
      : LrScheduler(opt, "range_test", detail::kKindRangeTest, total_steps),
        starts_(detail::per_group(o.min_lr, base_lrs_.size(), "min_lr")),
        ends_(detail::per_group(o.max_lr, base_lrs_.size(), "max_lr")) {
    for (size_t i = 0; i < starts_.size(); ++i)
      if (!(starts_[i] > 0.0 && ends_[i] > starts_[i]))
        detail::config_fail("max_lr", detail::concat("the range_test schedule sweeps from min_lr up to max_lr and "
                                                     "needs 0 < min_lr < max_lr; parameter group ", i, " has min_lr ",
                                                     starts_[i], " and max_lr ", ends_[i], "."));
    start();
  }

 protected:
  Values values_at(int64_t step) override {
    Values v;
    for (size_t i = 0; i < starts_.size(); ++i)
      v.lrs.push_back(range_test_lr(starts_[i], ends_[i], total_steps_, step));
    return v;
  }

 private:
  std::vector<double> starts_;
  std::vector<double> ends_;
};

}  // namespace

double range_test_lr(double start, double end, int64_t total_steps, int64_t step) {
  // The ends are returned as given, not as start × (end / start)^1, which can miss `end` by an
  // ulp: the sweep's bounds are exactly the numbers the user typed.
  if (step <= 0) return start;
  if (step >= total_steps - 1) return end;
  return start * std::pow(end / start, static_cast<double>(step) / static_cast<double>(total_steps - 1));
}

std::unique_ptr<LrScheduler> detail::make_range_test(const SchedulerOptions& o, torch::optim::Optimizer& opt,
                                                     int64_t total_steps) {
  if (total_steps < 2)
    config_fail("name", concat("the range_test schedule sweeps over the run's optimizer steps and needs at least 2 "
                               "(train.max_steps), got ", total_steps, "."));
  for (double m : o.min_lr)
    if (!(m > 0.0))
      config_fail("min_lr", concat("the range_test schedule starts at min_lr and needs it > 0 (e.g. 1e-7), got ", m,
                                   "."));
  if (o.max_lr.empty()) config_fail("max_lr", "the range_test schedule needs max_lr, the lr it ends at.");
  return std::make_unique<RangeTestSchedule>(opt, o, total_steps);
}

}  // namespace tp
