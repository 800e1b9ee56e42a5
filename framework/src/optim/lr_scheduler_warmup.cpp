// Warmup-then-decay schedules: "linear" (Hugging Face get_linear_schedule_with_warmup), "cosine"
// (linear warmup, then the closed form CosineAnnealingLR documents, down to min_lr) and
// "polynomial" (PolynomialLR's closed form, torchvision's segmentation reference); the warm-up
// before the decay or under it (timm's default), and a cool-down at min_lr at the end. All are
// closed forms of the step count (LambdaLR style), so they resume from the count alone and do not
// pick up rounding from a recursion.
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "tp/framework/error.h"
#include "tp/framework/optim/lr_scheduler.h"

namespace tp {
namespace {

/// The decay's shape after the warm-up.
enum class Decay { kLinear, kCosine, kPolynomial };

int kind_of(Decay decay) {
  switch (decay) {
    case Decay::kLinear: return detail::kKindLinear;
    case Decay::kCosine: return detail::kKindCosine;
    case Decay::kPolynomial: return detail::kKindPolynomial;
  }
  return detail::kKindLinear;
}

class WarmupDecaySchedule : public LrScheduler {
 public:
  WarmupDecaySchedule(torch::optim::Optimizer& opt, const SchedulerOptions& o, int64_t total_steps, Decay decay,
                      const detail::Span& span)
      : LrScheduler(opt, o.name, kind_of(decay), total_steps),
        decay_(decay),
        warmup_steps_(span.warmup),
        decay_start_(o.warmup_prefix ? span.warmup : 0),
        // PolynomialLR's total_iters, when given, counts from the decay's start (torchvision's
        // reference passes the run less its warm-up); else the decay ends with the run.
        decay_end_(decay == Decay::kPolynomial && o.total_iters > 0 ? decay_start_ + o.total_iters
                                                                    : total_steps - span.cooldown),
        start_factor_(o.warmup_start_factor),
        power_(o.power),
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
    // The decay runs from decay_start_ (the warm-up's end, or 0 when the warm-up lies under it as
    // in timm) to decay_end_ (the run's end less the cool-down). HF divides by max(1, T - w), so
    // a warm-up as long as the run is not a division by zero.
    const auto decay_steps = static_cast<double>(std::max<int64_t>(1, decay_end_ - decay_start_));
    const double done = s - static_cast<double>(decay_start_);
    if (decay_ == Decay::kPolynomial) {
      // PolynomialLR's closed form, base × (1 − min(T, t) / T)^power, in its operation order, so
      // min_lr 0 gives 0 + base × f == PyTorch's value; min_lr lifts the floor as mmseg's PolyLR
      // (eta_min) does, and past the end the lr stays there.
      const double t = std::min(done, decay_steps);
      return min_lr + (base - min_lr) * std::pow(1.0 - t / decay_steps, power_);
    }
    if (decay_ == Decay::kLinear) {
      // HF clamps at 0 past the end; min_lr 0 leaves 0 + base × f == base × f exactly.
      const double remaining = std::max(0.0, (static_cast<double>(decay_end_) - s) / decay_steps);
      return min_lr + (base - min_lr) * remaining;
    }
    // CosineAnnealingLR's documented closed form, eta_min + (base - eta_min)(1 + cos(pi t/T))/2,
    // written in its operation order. Past the end we hold min_lr (timm's cycle_limit 1, and its
    // cool-down); PyTorch's cosine is periodic and would climb back.
    const double t = std::min(done, decay_steps);
    return min_lr + (base - min_lr) * (1 + std::cos(std::numbers::pi * t / decay_steps)) / 2;
  }

  Decay decay_;
  int64_t warmup_steps_;
  int64_t decay_start_;
  int64_t decay_end_;
  double start_factor_;
  double power_;  ///< polynomial only
  std::vector<double> min_lrs_;
};

}  // namespace

std::unique_ptr<LrScheduler> detail::make_warmup_decay(const SchedulerOptions& o, torch::optim::Optimizer& opt,
                                                       int64_t total_steps, const Span& span) {
  using detail::concat;
  const auto fail = detail::config_fail;
  const bool steps = std::string(span.unit) == "optimizer steps";
  const std::string total = steps ? concat("total optimizer steps = ", total_steps) : concat("the run's ", span.unit, " = ", total_steps);
  if (total_steps < 1)
    fail("name", concat("the ", o.name, " schedule needs the run's total ", span.unit, " (> 0), got ", total_steps,
                        "; check epochs and batches per epoch."));
  if (span.warmup < 0 || span.warmup > total_steps)
    fail(span.warmup_key, concat("must be in [0, ", total, "], got ", span.warmup,
                                 span.warmup > total_steps
                                     ? concat(": the warm-up is longer than the run. Lower schedule.", span.warmup_key,
                                              " or raise train.epochs (or train.max_steps, where it sets the total).")
                                     : "."));
  if (span.cooldown > 0 && span.warmup + span.cooldown > total_steps)
    fail("cooldown_epochs", concat("the warm-up (", span.warmup, ") and the cool-down (", span.cooldown, ") take more ",
                                   span.unit, " than the run's ", total_steps,
                                   ", leaving no decay. timm's --epochs N --cooldown-epochs C trains N + C epochs: set "
                                   "train.epochs to that sum (train.max_steps, where set, cuts the run's total and comes "
                                   "first: raise it or drop it), or lower schedule.cooldown_epochs."));
  if (!(o.warmup_start_factor >= 0.0 && o.warmup_start_factor <= 1.0))
    fail("warmup_start_factor", concat("must be in [0, 1], got ", o.warmup_start_factor, "."));
  for (double m : o.min_lr)
    if (!(m >= 0.0)) fail("min_lr", concat("must be >= 0, got ", m, "."));
  Decay decay = o.name == "cosine" ? Decay::kCosine : Decay::kLinear;
  if (o.name == "polynomial") {
    decay = Decay::kPolynomial;
    if (!(o.power > 0.0 && std::isfinite(o.power)))
      fail("power", concat("must be a finite number > 0 (PolynomialLR's power; torchvision's segmentation reference "
                           "uses 0.9), got ", o.power, "."));
    if (o.total_iters < 0)
      fail("total_iters", concat("must be >= 0 (0: the decay ends with the run), got ", o.total_iters, "."));
    if (o.total_iters > 0 && span.cooldown > 0)
      fail("total_iters", concat("(", o.total_iters, ") and schedule.cooldown_epochs (", o.cooldown_epochs,
                                 ") both say where the decay ends; set one."));
  }
  return std::make_unique<WarmupDecaySchedule>(opt, o, total_steps, decay, span);
}

}  // namespace tp
