// reduce_on_plateau: torch.optim.lr_scheduler.ReduceLROnPlateau, driven by step_metric().
// Optimizer steps only count (for the checkpoint); evaluations move the lr.
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tp/framework/error.h"
#include "tp/framework/optim/lr_scheduler.h"

namespace tp {
namespace {

class PlateauSchedule : public LrScheduler {
 public:
  PlateauSchedule(torch::optim::Optimizer& opt, const SchedulerOptions& o)
      : LrScheduler(opt, "reduce_on_plateau", detail::kKindPlateau, 0),
        max_mode_(o.mode == "max"),
        rel_(o.threshold_mode == "rel"),
        factor_(o.factor),
        patience_(o.patience),
        threshold_(o.threshold),
        cooldown_(o.cooldown),
        eps_(o.eps),
        min_lrs_(detail::per_group(o.min_lr, base_lrs_.size(), "min_lr")),
        best_(worst()) {
    start();  // sets the current lrs again: ReduceLROnPlateau leaves them alone at construction
  }

  void step() override { ++steps_; }  // the lr only moves on evaluations

  void step_metric(double current) override {
    ++evaluations_;  // PyTorch's last_epoch; kept for the checkpoint only
    // A NaN metric compares false, so it counts as a bad evaluation, as in PyTorch.
    if (is_better(current)) {
      best_ = current;
      bad_evaluations_ = 0;
    } else {
      ++bad_evaluations_;
    }
    if (cooldown_counter_ > 0) {
      --cooldown_counter_;
      bad_evaluations_ = 0;  // bad evaluations during cooldown are ignored
    }
    if (bad_evaluations_ > patience_) {
      reduce();
      cooldown_counter_ = cooldown_;
      bad_evaluations_ = 0;
    }
  }

 protected:
  Values values_at(int64_t) override { return {lrs(), {}}; }

  void save_extra(std::vector<double>& out) const override {
    out.insert(out.end(), {best_, static_cast<double>(bad_evaluations_), static_cast<double>(cooldown_counter_),
                           static_cast<double>(evaluations_)});
  }
  size_t extra_size() const override { return 4; }
  void load_extra(const double* extra, size_t) override {
    best_ = extra[0];
    bad_evaluations_ = static_cast<int64_t>(extra[1]);
    cooldown_counter_ = static_cast<int64_t>(extra[2]);
    evaluations_ = static_cast<int64_t>(extra[3]);
  }

 private:
  double worst() const {
    return max_mode_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }

  // _is_better, in its operation order (best × (1 ∓ threshold), not best ∓ best × threshold).
  bool is_better(double a) const {
    if (!max_mode_ && rel_) return a < best_ * (1.0 - threshold_);
    if (!max_mode_) return a < best_ - threshold_;
    if (rel_) return a > best_ * (threshold_ + 1.0);
    return a > best_ + threshold_;
  }

  void reduce() {
    Values v{lrs(), {}};
    for (size_t i = 0; i < v.lrs.size(); ++i) {
      const double old_lr = v.lrs[i];
      const double new_lr = std::max(old_lr * factor_, min_lrs_[i]);
      // A reduction smaller than eps is skipped (the lr has reached min_lr, or nearly).
      if (old_lr - new_lr > eps_) v.lrs[i] = new_lr;
    }
    apply(v);
  }

  bool max_mode_;
  bool rel_;
  double factor_;
  int64_t patience_;
  double threshold_;
  int64_t cooldown_;
  double eps_;
  std::vector<double> min_lrs_;
  double best_;
  int64_t bad_evaluations_ = 0;
  int64_t cooldown_counter_ = 0;
  int64_t evaluations_ = 0;
};

}  // namespace

std::unique_ptr<LrScheduler> detail::make_plateau(const SchedulerOptions& o, torch::optim::Optimizer& opt) {
  using detail::concat;
  const auto fail = detail::config_fail;
  if (o.mode != "min" && o.mode != "max") fail("mode", "\"" + o.mode + "\" is not one of min, max.");
  if (o.threshold_mode != "rel" && o.threshold_mode != "abs")
    fail("threshold_mode", "\"" + o.threshold_mode + "\" is not one of rel, abs.");
  // PyTorch: "Factor should be < 1.0."; a factor <= 0 would zero the lr, and NaN must not pass.
  if (!(o.factor < 1.0 && o.factor > 0.0)) fail("factor", concat("must be in (0, 1), got ", o.factor, "."));
  if (o.patience < 0) fail("patience", concat("must be >= 0, got ", o.patience, "."));
  if (o.cooldown < 0) fail("cooldown", concat("must be >= 0, got ", o.cooldown, "."));
  if (!(o.threshold >= 0.0)) fail("threshold", concat("must be >= 0, got ", o.threshold, "."));
  if (!(o.eps >= 0.0)) fail("eps", concat("must be >= 0, got ", o.eps, "."));
  for (double m : o.min_lr)
    if (!(m >= 0.0)) fail("min_lr", concat("must be >= 0, got ", m, "."));
  return std::make_unique<PlateauSchedule>(opt, o);
}

}  // namespace tp
