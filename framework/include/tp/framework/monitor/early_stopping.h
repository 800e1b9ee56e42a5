// EarlyStopping: stops training when the monitored evaluation value has not improved by more
// than min_delta for `patience` evaluations, at once when it passes stop_below or stop_above
// (Lightning's stopping and divergence thresholds), or at once when it is NaN/Inf
// (check_finite); min_epochs holds back all but the last until that many epochs are trained.
// Its state (best, evaluations without improvement, what stopped it) is
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

  /// Off when patience == 0 and neither threshold is set.
  bool enabled() const;

  /// Feeds one evaluation made after `epochs_trained` whole epochs. Returns the reason to stop
  /// (one sentence, for the log) or nothing; a stop min_epochs holds back returns nothing (and
  /// comes again at a later evaluation whose value still calls for it). An evaluation without
  /// the monitored name is an error naming the names it had.
  std::optional<std::string> update(const std::vector<std::pair<std::string, double>>& evaluation,
                                    int64_t epochs_trained);

  /// Why the run this state was saved from had been stopped by early stopping, judged with
  /// today's options (a patience raised since lets the run train on); nothing when it was not.
  /// A resumed run asks before its first step: a run early stopping ended is over, as one that
  /// trained every epoch is, and does not train one more epoch to find that out again.
  /// `epochs_trained`: the whole epochs before the resume (a stop min_epochs would still hold
  /// back has not ended the run).
  std::optional<std::string> ended_run(int64_t epochs_trained) const;

  /// {best, evaluations without improvement, 1 when a non-finite value stopped the run, the
  /// value a threshold stopped it at (NaN when none did)}; empty when off.
  std::vector<double> state() const;
  /// Restores state(); ignores an empty or mis-sized vector (a checkpoint from a run without it).
  /// A two-value state (before the non-finite flag) reads as not stopped by a non-finite value,
  /// a three-value one (before the thresholds) as not stopped by a threshold.
  void load_state(const std::vector<double>& state);

 private:
  /// The threshold `value` passes ("below early_stopping.stop_below = x"), or "".
  std::string passed_threshold(double value) const;

  EarlyStoppingSection options_;
  double best_;
  int64_t wait_ = 0;
  bool stopped_non_finite_ = false;
  double threshold_value_; ///< the value a threshold stopped the run at; NaN while none did
};

}  // namespace tp
