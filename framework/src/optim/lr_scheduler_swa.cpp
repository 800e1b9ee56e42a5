// SWALR (torch.optim.swa_utils.SWALR), the lr schedule of stochastic weight averaging's epochs.
// PyTorch's get_lr() is recursive: it recovers each group's lr at SWA start from the group's
// current lr and the previous annealing factor, then blends towards swa_lr. Doing the same, in
// the same operation order, reproduces its sequence to the last bits (the tests compare to 1e-12).
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "tp/framework/error.h"
#include "tp/framework/optim/lr_scheduler.h"

namespace tp {
namespace {

class SwaSchedule : public LrScheduler {
 public:
  SwaSchedule(torch::optim::Optimizer& opt, std::vector<double> swa_lrs, int64_t anneal_epochs, bool cosine)
      : LrScheduler(opt, "swa", detail::kKindSwa, 0),
        swa_lrs_(std::move(swa_lrs)),
        anneal_epochs_(anneal_epochs),
        cosine_(cosine) {
    start();
  }

 protected:
  Values values_at(int64_t step) override {
    // SWALR.get_lr with step = _step_count - 1 (0 at construction).
    if (anneal_epochs_ == 0) step = std::max<int64_t>(1, step);
    const auto span = static_cast<double>(std::max<int64_t>(1, anneal_epochs_));
    const double prev_alpha = anneal(std::clamp(static_cast<double>(step - 1) / span, 0.0, 1.0));
    const double alpha = anneal(std::clamp(static_cast<double>(step) / span, 0.0, 1.0));
    const std::vector<double> current = lrs();
    Values v;
    for (size_t i = 0; i < current.size(); ++i) {
      // _get_initial_lr: the group's lr when SWA began, recovered from the current one.
      const double initial = prev_alpha == 1.0 ? swa_lrs_[i] : (current[i] - prev_alpha * swa_lrs_[i]) / (1 - prev_alpha);
      v.lrs.push_back(swa_lrs_[i] * alpha + initial * (1 - alpha));
    }
    return v;
  }

 private:
  double anneal(double t) const { return cosine_ ? (1 - std::cos(std::numbers::pi * t)) / 2 : t; }

  std::vector<double> swa_lrs_;
  int64_t anneal_epochs_;
  bool cosine_;
};

}  // namespace

std::unique_ptr<LrScheduler> make_swa_scheduler(torch::optim::Optimizer& optimizer, const std::vector<double>& swa_lrs,
                                                int64_t anneal_epochs, bool cosine) {
  const size_t groups = optimizer.param_groups().size();
  std::vector<double> lrs = swa_lrs.size() == 1 ? std::vector<double>(groups, swa_lrs.front()) : swa_lrs;
  const bool positive = std::all_of(lrs.begin(), lrs.end(), [](double lr) { return lr > 0.0; });
  if (lrs.size() != groups || !positive)
    throw ConfigError("swa.lr", "swa.lr: expected one value > 0, or one per parameter group (" +
                                    std::to_string(groups) + "), the lr the SWA epochs anneal to (e.g. swa.lr = 0.05); "
                                    "got " + std::to_string(swa_lrs.size()) + " value(s)" +
                                    (positive ? "" : ", not all > 0") + ".");
  if (anneal_epochs < 0) throw ConfigError("swa.anneal_epochs", "swa.anneal_epochs must be >= 0.");
  return std::make_unique<SwaSchedule>(optimizer, std::move(lrs), anneal_epochs, cosine);
}

}  // namespace tp
