// EarlyStopping: stops training when the monitored evaluation value has not improved by more
// than min_delta for `patience` evaluations, or at once when it is NaN/Inf (check_finite).
// Its state (best, evaluations without improvement) is checkpointed so a resumed run stops at
// the same evaluation as an uninterrupted one.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/config/run_config.h"

namespace tp {

class EarlyStopping {
 public:
  explicit EarlyStopping(EarlyStoppingSection options);

  /// Off when patience == 0.
  bool enabled() const { return options_.patience > 0; }

  /// Feeds one evaluation. Returns the reason to stop (one sentence, for the log) or nothing.
  /// An evaluation without the monitored name is an error naming the names it had.
  std::optional<std::string> update(const std::vector<std::pair<std::string, double>>& evaluation);

  /// {best, evaluations without improvement}; empty when off.
  std::vector<double> state() const;
  /// Restores state(); ignores an empty or mis-sized vector (a checkpoint from a run without it).
  void load_state(const std::vector<double>& state);

 private:
  EarlyStoppingSection options_;
  double best_;
  int64_t wait_ = 0;
};

}  // namespace tp
