// When the trainer redraws plots/*.png (plots.min_interval_s, docs/plots.md "When"). Each redraw
// re-reads the whole history and renders every chart, so its cost grows with the run (soak trial
// F3: 70 -> 120 ms per evaluation over 800 evaluations, more than the training step itself); at
// most one redraw per interval bounds the share of time the plots take, and the end of fit()
// redraws regardless, so the files a finished, paused or signalled run leaves are current.
#pragma once

#include <chrono>
#include <optional>

namespace tp {

class PlotClock {
 public:
  /// True when a redraw is due: `final` (the end of fit), none drawn yet, or at least
  /// `min_interval_s` seconds since the last one ended (0: after every evaluation).
  bool due(double min_interval_s, bool final) const {
    if (final || !last_ || min_interval_s <= 0) return true;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - *last_).count() >= min_interval_s;
  }
  /// A redraw (or an attempt at one) ended now.
  void drawn() { last_ = std::chrono::steady_clock::now(); }

 private:
  std::optional<std::chrono::steady_clock::time_point> last_;
};

}  // namespace tp
