// Warmup-then-decay schedules: "linear" (Hugging Face get_linear_schedule_with_warmup) and
// "cosine" (linear warmup, then the closed form CosineAnnealingLR documents, down to min_lr).
// Both are closed forms of the step count (LambdaLR style), so they resume from the count alone
// and do not pick up rounding from a recursion.
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "tp/framework/error.h"
#include "tp/framework/optim/lr_scheduler.h"

namespace tp {
namespace {

class WarmupDecaySchedule : public LrScheduler {
 public:
  WarmupDecaySchedule(torch::optim::Optimizer& opt, const SchedulerOptions& o, int64_t total_steps, bool cosine)
      : LrScheduler(opt, o.name, cosine ? detail::kKindCosine : detail::kKindLinear, total_steps),
        cosine_(cosine),
        warmup_steps_(o.warmup_steps),
        start_factor_(o.warmup_start_factor),
        min_lrs_(detail::per_group(o.min_lr, base_lrs_.size(), "min_lr")) {
    start();
  }

 protected:
  Values values_at(int64_t step) override {
    Values v;
    for (size_t i = 0; i < base_lrs_.size(); ++i) v.lrs.push_back(lr_at(step, base_lrs_[i], min_lrs_[i]));
    return v;
  }

 private:
  double lr_at(int64_t step, double base, double min_lr) const {
    const auto s = static_cast<double>(step);
    if (step < warmup_steps_) {
      // LinearLR's closed form; with start factor 0 this is HF's s / w bit for bit.
      return base * (start_factor_ + (1.0 - start_factor_) * (s / static_cast<double>(warmup_steps_)));
    }
    // HF divides by max(1, T - w), so warmup_steps == total_steps is not a division by zero.
    const auto decay_steps = static_cast<double>(std::max<int64_t>(1, total_steps_ - warmup_steps_));
    const double done = s - static_cast<double>(warmup_steps_);
    if (!cosine_) {
      // HF clamps at 0 past the end; min_lr 0 leaves 0 + base × f == base × f exactly.
      const double remaining = std::max(0.0, (static_cast<double>(total_steps_) - s) / decay_steps);
      return min_lr + (base - min_lr) * remaining;
    }
    // CosineAnnealingLR's documented closed form, eta_min + (base - eta_min)(1 + cos(pi t/T))/2,
    // written in its operation order. Past the end we hold min_lr; PyTorch's cosine is periodic
    // and would climb back, which only a miscounted run would reach.
    const double t = std::min(done, decay_steps);
    return min_lr + (base - min_lr) * (1 + std::cos(std::numbers::pi * t / decay_steps)) / 2;
  }

  bool cosine_;
  int64_t warmup_steps_;
  double start_factor_;
  std::vector<double> min_lrs_;
};

}  // namespace

std::unique_ptr<LrScheduler> detail::make_warmup_decay(const SchedulerOptions& o, torch::optim::Optimizer& opt,
                                                       int64_t total_steps) {
  using detail::concat;
  const auto fail = detail::config_fail;
  if (total_steps < 1)
    fail("name", concat("the ", o.name, " schedule needs the run's total optimizer steps (> 0), got ", total_steps,
                        "; check epochs and batches per epoch."));
  if (o.warmup_steps < 0 || o.warmup_steps > total_steps)
    fail("warmup_steps", concat("must be in [0, total optimizer steps = ", total_steps, "], got ", o.warmup_steps,
                                o.warmup_steps > total_steps
                                    ? ": the warm-up is longer than the run. Lower schedule.warmup_steps or raise "
                                      "train.epochs (or train.max_steps, where it sets the total)."
                                    : "."));
  if (!(o.warmup_start_factor >= 0.0 && o.warmup_start_factor <= 1.0))
    fail("warmup_start_factor", concat("must be in [0, 1], got ", o.warmup_start_factor, "."));
  for (double m : o.min_lr)
    if (!(m >= 0.0)) fail("min_lr", concat("must be >= 0, got ", m, "."));
  return std::make_unique<WarmupDecaySchedule>(opt, o, total_steps, o.name == "cosine");
}

}  // namespace tp
