// OneCycle: torch.optim.lr_scheduler.OneCycleLR, step for step, with its momentum cycling.
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <numbers>

#include "tp/framework/error.h"
#include "tp/framework/optim/lr_scheduler.h"

namespace tp {
namespace {

// The value OneCycleLR's group keys ("initial_lr", "max_lr", ...) name in a phase.
enum Anchor { kInitial, kMax, kMin, kMaxMomentum, kBaseMomentum };

struct Phase {
  double end_step;  // a double, as in PyTorch: pct_start × total is not rounded
  Anchor start_lr, end_lr, start_momentum, end_momentum;
};

// Where a group's momentum lives. PyTorch picks beta1 when the optimizer has "betas", else
// "momentum"; these are the LibTorch optimizers with either.
bool set_momentum(torch::optim::OptimizerOptions& options, double momentum) {
  if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&options)) {
    sgd->momentum(momentum);
  } else if (auto* adamw = dynamic_cast<torch::optim::AdamWOptions*>(&options)) {
    adamw->betas({momentum, std::get<1>(adamw->betas())});
  } else if (auto* adam = dynamic_cast<torch::optim::AdamOptions*>(&options)) {
    adam->betas({momentum, std::get<1>(adam->betas())});
  } else if (auto* rmsprop = dynamic_cast<torch::optim::RMSpropOptions*>(&options)) {
    rmsprop->momentum(momentum);
  } else {
    return false;
  }
  return true;
}

class OneCycleSchedule : public LrScheduler {
 public:
  OneCycleSchedule(torch::optim::Optimizer& opt, const SchedulerOptions& o, int64_t total_steps)
      : LrScheduler(opt, "one_cycle", detail::kKindOneCycle, total_steps),
        linear_(o.anneal_strategy == "linear"),
        cycle_momentum_(o.cycle_momentum) {
    const size_t groups = base_lrs_.size();
    max_lrs_ = detail::per_group(o.max_lr, groups, "max_lr");
    for (size_t i = 0; i < groups; ++i) {
      // OneCycleLR overwrites each group's initial_lr, so base_lrs are max_lr / div_factor.
      base_lrs_[i] = max_lrs_[i] / o.div_factor;
      min_lrs_.push_back(base_lrs_[i] / o.final_div_factor);
    }
    if (cycle_momentum_) {
      max_momenta_ = detail::per_group(o.max_momentum, groups, "max_momentum");
      base_momenta_ = detail::per_group(o.base_momentum, groups, "base_momentum");
      // Like OneCycleLR.__init__, start each group at max_momentum (step 0 recomputes it).
      for (size_t g = 0; g < groups; ++g)
        if (!set_momentum(optimizer_.param_groups()[g].options(), max_momenta_[g]))
          detail::config_fail("cycle_momentum",
                              "the optimizer has neither momentum nor beta1 to cycle (SGD, RMSprop, Adam, AdamW have); "
                              "set cycle_momentum = false.");
    }
    const auto t = static_cast<double>(total_steps);
    // The phase table of OneCycleLR.__init__, including its float end steps.
    if (o.three_phase) {
      phases_ = {{o.pct_start * t - 1, kInitial, kMax, kMaxMomentum, kBaseMomentum},
                 {2 * o.pct_start * t - 2, kMax, kInitial, kBaseMomentum, kMaxMomentum},
                 {t - 1, kInitial, kMin, kMaxMomentum, kMaxMomentum}};
    } else {
      phases_ = {{o.pct_start * t - 1, kInitial, kMax, kMaxMomentum, kBaseMomentum},
                 {t - 1, kMax, kMin, kBaseMomentum, kMaxMomentum}};
    }
    // PyTorch divides by a zero-length phase (ZeroDivisionError) the first time it reaches one;
    // every phase is reached within steps 0..total, so refuse such a table now.
    double start_step = 0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      if (phases_[i].end_step == start_step)
        detail::config_fail("pct_start", detail::concat(o.pct_start, " with ", total_steps, " total steps gives OneCycle phase ",
                                                        i + 1, " zero length (PyTorch divides by zero there); change pct_start."));
      start_step = phases_[i].end_step;
    }
    start();
  }

 protected:
  Values values_at(int64_t step) override {
    // PyTorch allows exactly total_steps calls of step() (the last sets an lr no optimizer step
    // uses) and raises ValueError on the next; we refuse before changing anything.
    if (step > total_steps_)
      throw Error(detail::concat(
          "OneCycleLR ran past its total of ", total_steps_, " steps (step() call number ", step,
          "); total steps are computed from epochs × batches per epoch / grad_accum_steps (tp::total_optimizer_steps, "
          "per rank, the short last window counting as a step), so step() must run once per optimizer step, not per "
          "batch or micro-batch, and epochs/batches must match the ones the schedule was built with."));
    Values v;
    const auto s = static_cast<double>(step);
    for (size_t g = 0; g < base_lrs_.size(); ++g) {
      double start_step = 0;
      for (size_t i = 0; i < phases_.size(); ++i) {
        const Phase& p = phases_[i];
        // Steps past the last phase's end (only step == total) extrapolate it, as PyTorch does.
        if (s <= p.end_step || i + 1 == phases_.size()) {
          const double pct = (s - start_step) / (p.end_step - start_step);
          v.lrs.push_back(anneal(value(p.start_lr, g), value(p.end_lr, g), pct));
          if (cycle_momentum_) v.momenta.push_back(anneal(value(p.start_momentum, g), value(p.end_momentum, g), pct));
          break;
        }
        start_step = p.end_step;
      }
    }
    return v;
  }

  void load_extra(const double*, size_t) override {
    // Momentum is a function of the step count; the restored lrs equal the recomputed ones.
    apply(values_at(steps_));
  }

  void apply_momenta(const std::vector<double>& momenta) override {
    auto& groups = optimizer_.param_groups();
    for (size_t g = 0; g < groups.size(); ++g) set_momentum(groups[g].options(), momenta.at(g));
  }

 private:
  double value(Anchor a, size_t g) const {
    switch (a) {
      case kInitial: return base_lrs_[g];
      case kMax: return max_lrs_[g];
      case kMin: return min_lrs_[g];
      case kMaxMomentum: return max_momenta_[g];
      case kBaseMomentum: return base_momenta_[g];
    }
    return 0;
  }

  // _annealing_cos and _annealing_linear, in their operation order.
  double anneal(double start, double end, double pct) const {
    if (linear_) return (end - start) * pct + start;
    const double cos_out = std::cos(std::numbers::pi * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
  }

  bool linear_;
  bool cycle_momentum_;
  std::vector<double> max_lrs_, min_lrs_, max_momenta_, base_momenta_;
  std::vector<Phase> phases_;
};

}  // namespace

std::unique_ptr<LrScheduler> detail::make_one_cycle(const SchedulerOptions& o, torch::optim::Optimizer& opt,
                                                    int64_t total_steps) {
  using detail::concat;
  const auto fail = detail::config_fail;
  if (total_steps < 1)
    fail("name", concat("one_cycle needs the run's total optimizer steps (> 0), got ", total_steps,
                        "; check epochs and batches per epoch."));
  if (o.max_lr.empty()) fail("max_lr", "one_cycle needs max_lr (the peak lr, one value or one per parameter group).");
  for (double m : o.max_lr)
    if (!(m > 0.0)) fail("max_lr", concat("must be > 0, got ", m, "."));
  if (!(o.pct_start >= 0.0 && o.pct_start <= 1.0))
    fail("pct_start", concat("must be in [0, 1], got ", o.pct_start, "."));
  if (o.anneal_strategy != "cos" && o.anneal_strategy != "linear")
    fail("anneal_strategy", "\"" + o.anneal_strategy + "\" is not one of cos, linear.");
  if (!(o.div_factor > 0.0)) fail("div_factor", concat("must be > 0, got ", o.div_factor, "."));
  if (!(o.final_div_factor > 0.0))
    fail("final_div_factor", concat("must be > 0, got ", o.final_div_factor, "."));
  return std::make_unique<OneCycleSchedule>(opt, o, total_steps);
}

}  // namespace tp
