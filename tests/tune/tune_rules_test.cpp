// The arithmetic of `host tune` without running anything (docs/tune.md): the bias-corrected
// smoothing and Lightning's stop rule, the suggestion's edge cases, the batch-size search's
// documented sequence and --memory-limit sizes. The suggestion itself is checked against
// Lightning in tune_lr_test.cpp.
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "tp/framework/error.h"
#include "tune/tune_batch_search.h"
#include "tune/tune_lr_rule.h"
#include "tune/tune_memory.h"

#include <doctest/doctest.h>

using tp::cli::BatchSearch;
using tp::cli::LossSmoother;
using tp::cli::parse_memory_size;
using tp::cli::longest_valley;
using tp::cli::lowest_loss;
using tp::cli::lightning_smoothed;
using tp::cli::steepest_descent;

TEST_CASE("the smoothed loss is the bias-corrected average; it diverges above 4x the best, or on NaN") {
  LossSmoother s;
  CHECK(s.add(2.0) == doctest::Approx(2.0)); // a constant series smooths to itself
  CHECK(s.add(2.0) == doctest::Approx(2.0));
  CHECK_FALSE(s.diverged());
  // (1 - 0.98) x (0.98^2 x 2 + 0.98 x 2 + 1) / (1 - 0.98^3): the bias-corrected average of 2, 2, 1.
  const double expected = (0.98 * 0.98 * 2 + 0.98 * 2 + 1.0) * 0.02 / (1 - std::pow(0.98, 3));
  CHECK(s.add(1.0) == doctest::Approx(expected).epsilon(1e-14));
  CHECK(s.best() == doctest::Approx(expected).epsilon(1e-14));
  double last = 0;
  while (!s.diverged()) last = s.add(1000.0);
  CHECK(last > 4 * s.best());
  CHECK(s.count() == 4); // the first huge loss is already 20x the best

  LossSmoother first;
  first.add(1e9); // the first point never diverges (nothing before it)
  CHECK_FALSE(first.diverged());
  LossSmoother nan;
  nan.add(1.0);
  CHECK(std::isnan(nan.add(std::numeric_limits<double>::quiet_NaN())));
  CHECK(nan.diverged());
}

TEST_CASE("the suggestion: the steepest descent over the points Lightning keeps, none when too few") {
  std::vector<double> lrs, losses;
  for (int k = 0; k < 30; ++k) {
    lrs.push_back(1e-5 * std::pow(10.0, k / 10.0));
    losses.push_back(k < 20 ? 1.0 - 0.001 * k : 0.98 - 0.1 * (k - 19)); // falls fastest after 20
  }
  const auto at = steepest_descent(lrs, losses);
  REQUIRE(at);
  CHECK(*at >= 20);
  CHECK(*at <= 28); // never the last point
  // 12 points: 10 skipped at the start, 1 at the end, 1 left: no suggestion (Lightning's None).
  CHECK_FALSE(steepest_descent({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, std::vector<double>(12, 1.0)));
  CHECK(steepest_descent({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, std::vector<double>(13, 1.0)) == 10u);
  // Non-finite losses are dropped before the gradient; the index is still into the full series.
  std::vector<double> gaps = losses;
  gaps[21] = std::numeric_limits<double>::quiet_NaN();
  const auto with_gap = steepest_descent(lrs, gaps);
  REQUIRE(with_gap);
  CHECK(*with_gap != 21u);
}

TEST_CASE("Lightning's smoothing divides by 1 - beta^(k+1): its first point is about half the loss") {
  const std::vector<double> smoothed = lightning_smoothed({2.0, 2.0, 1.0, std::nan(""), 1.0});
  REQUIRE(smoothed.size() == 5);
  CHECK(smoothed[0] == doctest::Approx(0.02 * 2.0 / (1 - 0.98 * 0.98)).epsilon(1e-12)); // 1.0101, ours 2.0
  const double average = 0.98 * (0.98 * 0.04 + 0.04) + 0.02 * 1.0;
  CHECK(smoothed[2] == doctest::Approx(average / (1 - 0.98 * 0.98 * 0.98 * 0.98)).epsilon(1e-12));
  CHECK(std::isnan(smoothed[3])); // a NaN never leaves the average, as in Lightning
  CHECK(std::isnan(smoothed[4]));
}

TEST_CASE("the suggestion: fastai's valley, two thirds down the longest descent, with fastai's quirks") {
  using Series = std::vector<double>;
  // The longest decreasing run is 9, 8, ..., 1 (indices 2..10, length 9, its start taken as 10 - 9 = 1):
  // 1 + 9/3 + 9/6 = 5 (indices from tests/tune/lr_oracle.py's verbatim copy of fastai's valley).
  CHECK(longest_valley(Series{9, 9, 9, 8, 7, 6, 5, 4, 3, 2, 1, 5}, 0, 0) == 5u);
  // A descent from the first point: fastai's start is one before it (-1 + 5/3 + 5/6 = 0) ...
  CHECK(longest_valley(Series{5, 4, 3, 2, 1, 2, 3}, 0, 0) == 0u);
  // ... and for two points its index -1 wraps to the last, as lrs[-1] does in Python.
  CHECK(longest_valley(Series{5, 4}, 0, 0) == 1u);
  CHECK(longest_valley(Series{2}, 0, 0) == 0u);
  // The skipped points: indices stay those of the full series; none left, no suggestion.
  CHECK(longest_valley(Series{0, 0, 9, 9, 9, 8, 7, 6, 5, 4, 3, 2, 1, 5, 0, 0, 0, 0, 0}, 2, 5) == 7u);
  CHECK_FALSE(longest_valley(Series{1, 2, 3}, 2, 1));
  // The kept points end before the first non-finite loss (fastai cuts at its first NaN).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(longest_valley(Series{3, 2, 1, nan, 0.5, 0.4, 0.3, 0.2, 0.1}, 0, 0) == longest_valley(Series{3, 2, 1}, 0, 0));
  CHECK_FALSE(longest_valley(Series{nan, 1, 0.5}, 0, 0));
  // fastai's "minimum": the lowest kept point, the first on ties, never one past a NaN.
  CHECK(lowest_loss(Series{0.1, 3, 2, 1, 1, 4, 0.2}, 1, 1) == 3u);
  CHECK(lowest_loss(Series{3, 2, nan, 1}, 0, 0) == 1u);
  CHECK_FALSE(lowest_loss(Series{1, 2}, 1, 1));
}

namespace {

// The documented sequence (tune_batch_search.h, docs/tune.md) for a device where sizes up to
// `largest` fit.
std::vector<std::pair<int64_t, bool>> search(int64_t start, int64_t max, int64_t largest) {
  BatchSearch s(start, max);
  std::vector<std::pair<int64_t, bool>> tried;
  while (const auto size = s.next()) {
    tried.emplace_back(*size, *size <= largest);
    s.record(*size, *size <= largest);
  }
  CHECK(s.result() == std::min(largest, max));
  return tried;
}

}  // namespace

TEST_CASE("the batch-size search doubles from the start, then bisects to a resolution of 1") {
  using Tried = std::vector<std::pair<int64_t, bool>>;
  CHECK(search(64, 6000, 700) == Tried{{64, true}, {128, true}, {256, true}, {512, true}, {1024, false},
                                       {768, false}, {640, true}, {704, false}, {672, true}, {688, true},
                                       {696, true}, {700, true}, {702, false}, {701, false}});
  CHECK(search(64, 6000, 10) == Tried{{64, false}, {32, false}, {16, false}, {8, true}, {12, false}, {10, true},
                                      {11, false}});
  CHECK(search(64, 100, 1000) == Tried{{64, true}, {100, true}}); // capped: a fit at max ends it
  CHECK(search(200, 100, 1000) == Tried{{100, true}});            // the start is clamped to max
  CHECK(search(64, 6000, 0) ==
        Tried{{64, false}, {32, false}, {16, false}, {8, false}, {4, false}, {2, false}, {1, false}});
}

TEST_CASE("--memory-limit sizes: binary and decimal units, a bare number is bytes, anything else refused") {
  CHECK(parse_memory_size("4GiB") == 4.0 * (1 << 30));
  CHECK(parse_memory_size("4g") == 4.0 * (1 << 30));
  CHECK(parse_memory_size("512 MiB") == 512.0 * (1 << 20));
  CHECK(parse_memory_size("1.5GB") == 1.5e9);
  CHECK(parse_memory_size("500MB") == 5e8);
  CHECK(parse_memory_size("2000000000") == 2e9);
  for (const char* bad : {"", "GiB", "4 lots", "-1GiB", "0", "nan", "4GiBs"})
    CHECK_THROWS_AS(parse_memory_size(bad), tp::ConfigError);
}
