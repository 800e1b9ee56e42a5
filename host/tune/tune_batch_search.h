// The order in which `host tune batch-size` tries micro-batch sizes (docs/tune.md): doubling from
// a start until a size fails, then bisecting between the largest size that fit and the smallest
// that failed, to a resolution of 1 (Lightning's scale_batch_size(mode="binsearch")). Pure
// bookkeeping, so the documented sequence is tested without running anything.
#pragma once

#include <cstdint>
#include <optional>

namespace tp::cli {

/// The search state: `fit` is the largest size known to fit (0: none yet), `fail` the smallest
/// known to fail (0: none yet). Sizes above `max` are never tried.
///
/// Sequence: `start` (clamped to [1, max]) first. While nothing has failed, each fit doubles
/// (capped at max; a fit at max ends the search). Once something failed, the next size is
/// fit + (fail − fit) / 2 (integer division), until fail − fit == 1. So every size ≤ fit fitted
/// and every size ≥ fail failed, whatever the trials measured; the result is fit.
/// Example (start 64, max 6000, sizes up to 700 fit): 64 ✓ 128 ✓ 256 ✓ 512 ✓ 1024 ✗ 768 ✗ 640 ✓
/// 704 ✗ 672 ✓ 688 ✓ 696 ✓ 700 ✓ 702 ✗ 701 ✗ -> 700 (14 trials).
/// Not thread-safe; [main].
class BatchSearch {
 public:
  /// `max` >= 1.
  BatchSearch(int64_t start, int64_t max);

  /// The next size to try, or nothing when the search is over.
  std::optional<int64_t> next() const;
  /// Records the outcome of trying `size` (the value next() returned).
  void record(int64_t size, bool fits);
  /// The largest size that fit, or 0 when none did.
  int64_t result() const noexcept { return fit_; }

 private:
  int64_t start_;
  int64_t max_;
  int64_t fit_ = 0;
  int64_t fail_ = 0;
  bool started_ = false;
};

}  // namespace tp::cli
