#include "tune/tune_batch_search.h"

#include <algorithm>

namespace tp::cli {

BatchSearch::BatchSearch(int64_t start, int64_t max)
    : start_(std::clamp<int64_t>(start, 1, std::max<int64_t>(1, max))), max_(std::max<int64_t>(1, max)) {}

std::optional<int64_t> BatchSearch::next() const {
  if (!started_) return start_;
  if (fail_ == 0) {
    // Growing: nothing failed yet.
    if (fit_ >= max_) return std::nullopt;
    return std::min(2 * fit_, max_);
  }
  if (fail_ - fit_ <= 1) return std::nullopt;
  return fit_ + (fail_ - fit_) / 2;
}

void BatchSearch::record(int64_t size, bool fits) {
  started_ = true;
  if (fits) fit_ = std::max(fit_, size);
  else fail_ = fail_ == 0 ? size : std::min(fail_, size);
}

}  // namespace tp::cli
