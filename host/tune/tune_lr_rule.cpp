#include "tune/tune_lr_rule.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

namespace tp::cli {

double LossSmoother::add(double loss) {
  ++count_;
  average_ = beta_ * average_ + (1.0 - beta_) * loss;
  correction_ *= beta_;
  const double smoothed = average_ / (1.0 - correction_);
  // Lightning: compare with the best before this point (from the second point on), then update it.
  diverged_ = !std::isfinite(smoothed) || (count_ > 1 && smoothed > stop_factor_ * best_);
  if (!diverged_ && (count_ == 1 || smoothed < best_)) best_ = smoothed;
  return std::isfinite(smoothed) ? smoothed : std::numeric_limits<double>::quiet_NaN();
}

std::vector<double> lightning_smoothed(const std::vector<double>& losses, double beta) {
  std::vector<double> out;
  out.reserve(losses.size());
  double average = 0.0;
  for (std::size_t k = 1; k <= losses.size(); ++k) {
    // _LRCallback: avg_loss = beta * avg_loss + (1 - beta) * loss; avg_loss / (1 - beta ** (global_step + 1)).
    average = beta * average + (1.0 - beta) * losses[k - 1];
    const double smoothed = average / (1.0 - std::pow(beta, static_cast<double>(k + 1)));
    out.push_back(std::isfinite(smoothed) ? smoothed : std::numeric_limits<double>::quiet_NaN());
  }
  return out;
}

std::optional<std::size_t> steepest_descent(const std::vector<double>& lrs, const std::vector<double>& losses,
                                            std::size_t skip_begin, std::size_t skip_end) {
  // The kept points, as Lightning keeps them: losses[skip_begin:-skip_end], finite ones only,
  // converted to float32 (torch.tensor of Python floats).
  std::vector<std::size_t> index;
  std::vector<float> x, f;
  const std::size_t n = std::min(lrs.size(), losses.size());
  for (std::size_t i = skip_begin; i + skip_end < n; ++i)
    if (std::isfinite(static_cast<float>(losses[i]))) {
      index.push_back(i);
      x.push_back(static_cast<float>(lrs[i]));
      f.push_back(static_cast<float>(losses[i]));
    }
  const std::size_t m = f.size();
  if (m < 2) return std::nullopt;
  // torch.gradient(f, spacing=[x]), edge_order 1 (aten/src/ATen/native/ReduceOps.cpp,
  // gradient_helper): one float32 rounding per tensor operation, in its order. Checked bit for
  // bit against torch 2.13 and 2.14 on random series.
  std::vector<float> dx(m - 1);
  for (std::size_t i = 0; i + 1 < m; ++i) dx[i] = x[i + 1] - x[i];
  std::vector<float> gradient(m);
  gradient[0] = (f[1] - f[0]) / dx[0];
  gradient[m - 1] = (f[m - 1] - f[m - 2]) / dx[m - 2];
  for (std::size_t i = 1; i + 1 < m; ++i) {
    const float dx1 = dx[i - 1];
    const float dx2 = dx[i];
    const float a = -dx2 / (dx1 * (dx1 + dx2));
    const float b = (dx2 - dx1) / (dx1 * dx2);
    const float c = dx1 / (dx2 * (dx1 + dx2));
    const float left = a * f[i - 1];
    const float middle = b * f[i];
    const float right = c * f[i + 1];
    gradient[i] = (left + middle) + right;
  }
  // torch.argmin: the first minimum; a NaN (0 / 0 between equal lrs) is the minimum, as in torch.
  std::size_t best = 0;
  for (std::size_t i = 1; i < m; ++i) {
    if (std::isnan(gradient[best])) break;
    if (std::isnan(gradient[i]) || gradient[i] < gradient[best]) best = i;
  }
  return index[best];
}

namespace {

/// fastai's kept points: [skip_begin, n - skip_end), cut before the first non-finite loss, as
/// float32 (its loss tensor).
std::vector<float> kept_losses(const std::vector<double>& losses, std::size_t skip_begin, std::size_t skip_end) {
  std::vector<float> kept;
  for (std::size_t i = skip_begin; i + skip_end < losses.size(); ++i) {
    const float loss = static_cast<float>(losses[i]);
    if (!std::isfinite(loss)) break;
    kept.push_back(loss);
  }
  return kept;
}

}  // namespace

std::optional<std::size_t> longest_valley(const std::vector<double>& losses, std::size_t skip_begin,
                                          std::size_t skip_end) {
  const std::vector<float> f = kept_losses(losses, skip_begin, skip_end);
  const auto n = static_cast<std::ptrdiff_t>(f.size());
  if (n == 0) return std::nullopt;
  // fastai's loops as written: lds[i] is the length of the longest decreasing subsequence ending
  // at i, and the best end is updated inside the inner loop, so ties keep the earliest end.
  std::vector<std::ptrdiff_t> lds(f.size(), 1);
  std::ptrdiff_t max_start = 0, max_end = 0;
  for (std::ptrdiff_t i = 1; i < n; ++i)
    for (std::ptrdiff_t j = 0; j < i; ++j) {
      if (f[i] < f[j] && lds[i] < lds[j] + 1) lds[i] = lds[j] + 1;
      if (lds[max_end] < lds[i]) {
        max_end = i;
        max_start = max_end - lds[max_end];
      }
    }
  const double sections = static_cast<double>(max_end - max_start) / 3.0;
  std::ptrdiff_t index = max_start + static_cast<std::ptrdiff_t>(sections) + static_cast<std::ptrdiff_t>(sections / 2);
  if (index < 0) index += n; // Python's lrs[-1]
  return skip_begin + static_cast<std::size_t>(index);
}

std::optional<std::size_t> lowest_loss(const std::vector<double>& losses, std::size_t skip_begin,
                                       std::size_t skip_end) {
  const std::vector<float> f = kept_losses(losses, skip_begin, skip_end);
  if (f.empty()) return std::nullopt;
  return skip_begin + static_cast<std::size_t>(std::min_element(f.begin(), f.end()) - f.begin());
}

}  // namespace tp::cli
