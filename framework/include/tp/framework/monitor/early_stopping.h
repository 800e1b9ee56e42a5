// EarlyStopping: stops training when the monitored evaluation value has not improved by more
// than min_delta for `patience` evaluations, at once when it passes stop_below or stop_above
// (Lightning's stopping and divergence thresholds), or at once when it is NaN/Inf
// (check_finite). As Lightning's Trainer(min_epochs), a stop called for before min_epochs whole
// epochs is held, not forgotten: it happens at the first evaluation once they are trained, even
// if the value improved meanwhile (a non-finite value is never held: the run diverged). Its state
// (best, evaluations without improvement, the held or taken stop) is checkpointed so a resumed
// run stops at the same evaluation as an uninterrupted one, and a run it stopped stays stopped
// when resumed (ended_run).
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
  /// value of the last threshold stop (NaN when none), the stop called for (0 none, 1 patience,
  /// 2 threshold), 1 when it was taken (not held by min_epochs), the patience count when it was
  /// called}; empty when off.
  std::vector<double> state() const;
  /// Restores state(); ignores an empty or mis-sized vector (a checkpoint from a run without it).
  /// A two-value state (before the non-finite flag) reads as not stopped by a non-finite value;
  /// two- and three-value states (before the thresholds and min_epochs) as stopped by patience
  /// when its count had reached it.
  void load_state(const std::vector<double>& state);

 private:
  /// Which rule called for a stop.
  enum class Cause { kNone = 0, kPatience = 1, kThreshold = 2 };

  /// The threshold `value` passes ("below early_stopping.stop_below = x"), or "".
  std::string passed_threshold(double value) const;
  /// The sentence of the stop called for, from the state; `had`: for a resumed run.
  std::string reason(bool had) const;

  EarlyStoppingSection options_;
  double best_;
  int64_t wait_ = 0;
  bool stopped_non_finite_ = false;
  double threshold_value_; ///< the value a threshold stop was called for at; NaN while none was
  Cause called_ = Cause::kNone; ///< the stop called for, sticky as Lightning's should_stop
  bool taken_ = false;          ///< the called stop happened (min_epochs were trained)
  int64_t called_wait_ = 0;     ///< a patience stop's count when called (wait_ may reset while held)
  bool held_ = false;           ///< min_epochs held the called stop at an evaluation (for the log)
};

}  // namespace tp
