// EarlyStopping: stops training when the monitored evaluation value has not improved by more
// than min_delta for `patience` evaluations, or at once when it is NaN/Inf (check_finite).
// Its state (best, evaluations without improvement, whether a non-finite value stopped it) is
// checkpointed so a resumed run stops at the same evaluation as an uninterrupted one, and a run it
// stopped stays stopped when resumed (ended_run).
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

  /// Why the run this state was saved from had been stopped by early stopping, judged with
  /// today's options (a patience raised since lets the run train on); nothing when it was not.
  /// A resumed run asks before its first step: a run early stopping ended is over, as one that
  /// trained every epoch is, and does not train one more epoch to find that out again.
  std::optional<std::string> ended_run() const;

  /// {best, evaluations without improvement, 1 when a non-finite value stopped the run}; empty
  /// when off.
  std::vector<double> state() const;
  /// Restores state(); ignores an empty or mis-sized vector (a checkpoint from a run without it).
  /// A two-value state (before the non-finite flag) reads as not stopped by a non-finite value.
  void load_state(const std::vector<double>& state);

 private:
  EarlyStoppingSection options_;
  double best_;
  int64_t wait_ = 0;
  bool stopped_non_finite_ = false;
};

}  // namespace tp
