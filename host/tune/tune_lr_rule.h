// The arithmetic of the learning-rate range test (`host tune lr`, docs/tune.md): the smoothed
// loss and its divergence test, fed one optimizer step at a time, and the suggestion from the
// finished sweep. Pure functions of the numbers, so the rule can be checked against Lightning's
// code on the same series (tests/tune/lr_oracle.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace tp::cli {

/// The exponential moving average of the training loss with bias correction (fastai's and
/// Lightning's lr finder, beta 0.98), and Lightning's early stop: the sweep has diverged when a
/// smoothed loss after the first exceeds `stop_factor` × the best smoothed loss before it
/// (Lightning's early_stop_threshold, 4). A non-finite loss also counts as diverged: the average
/// carries it forever, and Lightning (whose comparison is false for NaN) would only record NaNs.
///
/// The k-th loss (k = 1, 2, ...) gives avg_k = beta × avg_(k−1) + (1 − beta) × loss_k (avg_0 = 0)
/// and smoothed_k = avg_k / (1 − beta^k), fastai's correction. Lightning divides by
/// 1 − beta^(k+1), because its step counter has already advanced when it smooths; that halves its
/// first point and differs by less than 1% from the 60th on (lightning_smoothed() is its series,
/// for Lightning's rule). Not thread-safe; [main].
/// Example:
///   LossSmoother s;
///   for (double loss : losses) { smoothed.push_back(s.add(loss)); if (s.diverged()) break; }
class LossSmoother {
 public:
  explicit LossSmoother(double beta = 0.98, double stop_factor = 4.0) : beta_(beta), stop_factor_(stop_factor) {}

  /// Adds the next step's loss and returns its smoothed value (NaN once a loss was not finite).
  double add(double loss);
  /// Whether the point add() just took diverged (see the class comment); false before any.
  bool diverged() const noexcept { return diverged_; }
  /// The lowest smoothed loss so far, including the last point unless it diverged.
  double best() const noexcept { return best_; }
  /// Points added so far.
  int64_t count() const noexcept { return count_; }

 private:
  double beta_;
  double stop_factor_;
  double average_ = 0.0;
  double correction_ = 1.0; ///< beta^k
  double best_ = 0.0;
  int64_t count_ = 0;
  bool diverged_ = false;
};

/// fastai's "valley" rule (fastai.callback.schedule.valley and Learner.lr_find, fastai 2.7), the
/// suggestion `host tune lr` prints (docs/tune.md, "Which rule, and why"): keep the smoothed losses
/// [skip_begin, n - skip_end) (fastai: num_it // 10 and 5), cut at the first non-finite one, find
/// the longest strictly decreasing subsequence of the rest (its end, and its start taken as end
/// minus its length), and suggest the point two thirds of the way down: start + ⌊len/3⌋ +
/// ⌊len/6⌋ with len = end − start. Compared in float32, as fastai compares its loss tensor, so the
/// two pick the same index (tests/tune/lr_oracle.py). fastai's quirks are kept: the start may be
/// one before the first point, and an index of −1 wraps to the last point as Python's does.
/// Returns the index into `losses` (the full series), or nothing when no point remains.
/// O(n²) in the kept points: 25 ms for 2,000 steps.
std::optional<std::size_t> longest_valley(const std::vector<double>& losses, std::size_t skip_begin,
                                          std::size_t skip_end);

/// fastai's "minimum" rule's point: the index of the lowest smoothed loss among the points
/// longest_valley() keeps (the first on ties); the rule suggests a tenth of its lr. Nothing when
/// no point remains.
std::optional<std::size_t> lowest_loss(const std::vector<double>& losses, std::size_t skip_begin,
                                       std::size_t skip_end);

/// Lightning's smoothing of the same losses (lightning.pytorch.tuner.lr_finder._LRCallback, 2.6):
/// LossSmoother's average, divided by 1 − beta^(k+1) for the k-th loss (its step counter has
/// advanced when it smooths), in double as Python computes it; a non-finite loss makes that point
/// and every later one NaN. What steepest_descent reads so that the step printed as "Lightning's
/// rule" is the one Lightning's suggestion() picks on these losses: on our own smoothing the
/// argmin of the gradient, which the first points decide, moved from step 26 to 11 (experiments
/// trial F5).
std::vector<double> lightning_smoothed(const std::vector<double>& losses, double beta = 0.98);

/// Lightning's suggestion rule (lightning.pytorch.tuner.lr_finder._LRFinder.suggestion, 2.6):
/// drop the first `skip_begin` and the last `skip_end` points, then the non-finite losses; of
/// the rest, the point where the smoothed loss falls fastest, the argmin of its gradient with
/// respect to the lr (torch.gradient with the lrs as coordinates: second-order central
/// differences inside, one-sided at both ends; the first minimum on ties). Computed in float32
/// in torch's operation order, as Lightning computes it from Python floats, so the two agree on
/// the index. Returns the index into `lrs` (the full series), or nothing when fewer than 2
/// points remain (Lightning's None). `lrs` and `losses` have the same length.
std::optional<std::size_t> steepest_descent(const std::vector<double>& lrs, const std::vector<double>& losses,
                                            std::size_t skip_begin = 10, std::size_t skip_end = 1);

}  // namespace tp::cli
