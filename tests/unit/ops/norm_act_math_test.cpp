// The fused BatchNorm finalize's arithmetic (framework/src/ops/norm_act_math.h) on the CPU: a
// channel's values cut into row blocks as plan_reduction cuts them, each block's partial mean and
// M2 in float as batch_norm_act_stats computes them (shifted by the block's first value), then the
// finalize's combination: each of the 16 lanes its share of the blocks in order, then a tree over
// the lanes (lane i with lane i + stride, stride halving). Held against a two-pass mean and
// variance in double: every block counted once, whatever the block count (1 to 700, below and
// above the lane count), and the mean and variance within float rounding of the partials.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ops/norm_act_math.h"

#include <doctest/doctest.h>

namespace {

using tp::ops::kFinalizeLanes;
using tp::ops::Moments;

struct Partial {
  float mean, m2;
};

/// batch_norm_act_stats for one channel: per block, the mean and M2 of x - shift in float.
std::vector<Partial> partials(const std::vector<float>& x, int64_t rows_per_block, int32_t blocks) {
  std::vector<Partial> out;
  for (int32_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * rows_per_block;
    const int64_t n = tp::ops::block_row_count(b, rows_per_block, static_cast<int64_t>(x.size()));
    const float shift = x[static_cast<std::size_t>(begin)];
    float sum = 0.0F, sum_sq = 0.0F;
    for (int64_t r = begin; r < begin + n; ++r) {
      const float d = x[static_cast<std::size_t>(r)] - shift;
      sum += d;
      sum_sq += d * d;
    }
    const float mean_shifted = sum / static_cast<float>(n);
    out.push_back({shift + mean_shifted, std::fmax(sum_sq - sum * mean_shifted, 0.0F)});
  }
  return out;
}

/// batch_norm_act_finalize's combination for one channel: lanes, then the fixed tree.
Moments finalize(const std::vector<Partial>& parts, int64_t rows_per_block, int64_t rows, int64_t* blocks_seen) {
  Moments lanes[kFinalizeLanes];
  for (int lane = 0; lane < kFinalizeLanes; ++lane) {
    Moments m{0.0, 0.0, 0.0};
    const tp::ops::BlockShare share = tp::ops::lane_share(static_cast<int32_t>(parts.size()), lane);
    for (int64_t b = share.begin; b < share.end; ++b) {
      const Partial& p = parts[static_cast<std::size_t>(b)];
      m = tp::ops::combine(m, static_cast<double>(tp::ops::block_row_count(b, rows_per_block, rows)), p.mean, p.m2);
      ++*blocks_seen;
    }
    lanes[lane] = m;
  }
  for (int stride = kFinalizeLanes / 2; stride > 0; stride /= 2)
    for (int lane = 0; lane < stride; ++lane)
      lanes[lane] =
          tp::ops::combine(lanes[lane], lanes[lane + stride].n, lanes[lane + stride].mean, lanes[lane + stride].m2);
  return lanes[0];
}

}  // namespace

TEST_CASE("the finalize's lanes and tree give the two-pass mean and variance, every block once") {
  std::mt19937 rng(7);
  // Rows and rows per block as plan_reduction makes them: from one block to more than ResNet-50's 528.
  for (const auto& [rows, rows_per_block] :
       {std::pair<int64_t, int64_t>{1, 1}, {7, 64}, {200, 64}, {1000, 64}, {1021, 97}, {4096, 64}, {44800, 64},
        {200704, 381}}) {
    CAPTURE(rows);
    CAPTURE(rows_per_block);
    std::normal_distribution<float> value(3.0F, 2.0F);  // an offset mean: cancellation shows if the update is wrong
    std::vector<float> x(static_cast<std::size_t>(rows));
    for (float& v : x) v = value(rng);
    const auto blocks = static_cast<int32_t>((rows + rows_per_block - 1) / rows_per_block);
    int64_t seen = 0;
    const Moments m = finalize(partials(x, rows_per_block, blocks), rows_per_block, rows, &seen);
    CHECK(seen == blocks);
    CHECK(m.n == static_cast<double>(rows));
    double mean = 0.0;
    for (const float v : x) mean += v;
    mean /= static_cast<double>(rows);
    double m2 = 0.0;
    for (const float v : x) m2 += (v - mean) * (v - mean);
    CHECK(m.mean == doctest::Approx(mean).epsilon(1e-6));
    const double variance = m2 / static_cast<double>(rows);
    CHECK(m.m2 / static_cast<double>(rows) == doctest::Approx(variance).epsilon(1e-5));
  }
}

TEST_CASE("lane_share covers the row blocks once, in order, each lane a contiguous run") {
  for (int32_t blocks = 1; blocks <= 700; ++blocks) {
    int64_t next = 0;
    for (int lane = 0; lane < kFinalizeLanes; ++lane) {
      const tp::ops::BlockShare share = tp::ops::lane_share(blocks, lane);
      REQUIRE(share.begin == next);
      REQUIRE(share.end >= share.begin);
      next = share.end;
    }
    REQUIRE(next == blocks);
  }
}

TEST_CASE("combine: an empty side changes nothing, and the order of two sides only the rounding") {
  const Moments empty{0.0, 0.0, 0.0};
  const Moments a = tp::ops::combine(empty, 10.0, 2.5, 4.0);
  CHECK(a.n == 10.0);
  CHECK(a.mean == 2.5);
  CHECK(a.m2 == 4.0);
  const Moments same = tp::ops::combine(a, 0.0, 123.0, 456.0);
  CHECK(same.n == a.n);
  CHECK(same.mean == a.mean);
  CHECK(same.m2 == a.m2);
  const Moments b = tp::ops::combine(tp::ops::combine(empty, 3.0, -1.0, 2.0), 10.0, 2.5, 4.0);
  const Moments c = tp::ops::combine(a, 3.0, -1.0, 2.0);
  CHECK(b.n == c.n);
  CHECK(b.mean == doctest::Approx(c.mean).epsilon(1e-15));
  CHECK(b.m2 == doctest::Approx(c.m2).epsilon(1e-15));
  // Two blocks of known moments, {0, 2} (mean 1, M2 2) and {4, 6, 8} (mean 6, M2 8): together mean
  // 4 and M2 16 + 4 + 0 + 4 + 16.
  const Moments d = tp::ops::combine(tp::ops::combine(empty, 2.0, 1.0, 2.0), 3.0, 6.0, 8.0);
  CHECK(d.mean == doctest::Approx(4.0));
  CHECK(d.m2 == doctest::Approx(16.0 + 4.0 + 0.0 + 4.0 + 16.0));
}
