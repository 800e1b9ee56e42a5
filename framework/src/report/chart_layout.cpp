#include "chart_layout.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

namespace tp::detail {

void Range::add(double v) {
  lo = std::min(lo, v);
  hi = std::max(hi, v);
}

void Range::finish(double margin) {
  // Below this, a span or a value is treated as zero: PLplot refuses windows narrower than a few
  // ulps (and says so on stderr), and 10% of a denormal is 0.
  constexpr double kTiny = 1e-100;
  const double span = hi - lo;
  if (!(lo <= hi)) {
    lo = 0;
    hi = 1;
  } else if (span < kTiny || span <= std::max(std::abs(lo), std::abs(hi)) * 1e-9) {
    const double centre = lo + span / 2;
    const double pad = std::abs(centre) >= kTiny ? std::abs(centre) * 0.1 : 1.0;
    lo = centre - pad;
    hi = centre + pad;
  } else {
    const double pad = (hi - lo) * margin;
    lo -= pad;
    hi += pad;
  }
}

Series decimate(const Series& s, const Range& x_range, int columns) {
  if (s.x.size() <= 2 * static_cast<std::size_t>(columns)) return s;
  Series out = s;
  out.x.clear();
  out.y.clear();
  auto column_of = [&](double x) { return static_cast<long>(std::floor(x_range.fraction(x) * columns)); };
  std::size_t begin = 0;
  auto flush = [&](std::size_t end) {  // the run [begin, end) of finite points in one column
    if (begin >= end) return;
    std::size_t lo = begin, hi = begin;
    for (std::size_t i = begin; i < end; ++i) {
      if (s.y[i] < s.y[lo]) lo = i;
      if (s.y[i] > s.y[hi]) hi = i;
    }
    const std::size_t first = std::min(lo, hi), second = std::max(lo, hi);
    out.x.push_back(s.x[first]);
    out.y.push_back(s.y[first]);
    if (second != first) {
      out.x.push_back(s.x[second]);
      out.y.push_back(s.y[second]);
    }
    begin = end;
  };
  for (std::size_t i = 0; i < s.x.size(); ++i) {
    if (!std::isfinite(s.y[i]) || !std::isfinite(s.x[i])) {
      flush(i);
      out.x.push_back(s.x[i]);
      out.y.push_back(std::nan(""));
      begin = i + 1;
    } else if (i > begin && column_of(s.x[i]) != column_of(s.x[begin])) {
      flush(i);
    }
  }
  flush(s.x.size());
  return out;
}

Ticks choose_ticks(double lo, double hi, double target, double fixed_limit) {
  Ticks t;
  const double raw = (hi - lo) / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  t.step = (norm < 1.5 ? 1 : norm < 3.5 ? 2 : norm < 7.5 ? 5 : 10) * magnitude;
  const double largest = std::max(std::abs(lo), std::abs(hi));
  // The epsilon keeps log10(0.001) = -2.9999999999999996 from flooring to -3 one too low.
  const int step_exponent = static_cast<int>(std::floor(std::log10(t.step) + 1e-9));
  t.scientific = largest >= fixed_limit || step_exponent < -5;
  t.decimals = t.scientific ? std::max(0, static_cast<int>(std::floor(std::log10(largest))) - step_exponent)
                            : std::max(0, -step_exponent);
  return t;
}

std::string tick_text(const Ticks& t, double value) {
  value = std::round(value / t.step) * t.step;  // 0.30000000000000004 -> 0.3, 5.6e-17 -> 0
  if (value == 0) return "0";
  std::array<char, 64> text{};
  std::snprintf(text.data(), text.size(), t.scientific ? "%.*e" : "%.*f", t.decimals, value);
  return text.data();
}

namespace {

// The legend's box as a fraction of the plot area, estimated from its entries (PLplot only
// reports the real size after drawing it): about one text line per entry, and a line sample
// plus the longest label across.
struct LegendBox {
  double width;
  double height;
};

LegendBox legend_box(const std::vector<Series>& series) {
  std::size_t longest = 0;
  for (const Series& s : series) longest = std::max(longest, s.label.size());
  return {0.1 + 0.01 * static_cast<double>(longest), 0.03 + 0.06 * static_cast<double>(series.size())};
}

}  // namespace

Corner place_legend(const std::vector<Series>& series, const Range& x_range, Range& y_range) {
  constexpr std::array<Corner, 4> kCorners{Corner::kTopRight, Corner::kBottomRight, Corner::kTopLeft,
                                           Corner::kBottomLeft};
  const LegendBox box = legend_box(series);
  std::array<std::size_t, 4> covered{};
  for (const Series& s : series)
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      const double fx = x_range.fraction(s.x[i]), fy = y_range.fraction(s.y[i]);
      const bool right = fx > 1 - box.width, left = fx < box.width;
      const bool top = fy > 1 - box.height, bottom = fy < box.height;
      covered[0] += top && right;
      covered[1] += bottom && right;
      covered[2] += top && left;
      covered[3] += bottom && left;
    }
  const auto best = static_cast<std::size_t>(std::min_element(covered.begin(), covered.end()) - covered.begin());
  if (covered[best] == 0) return kCorners[best];
  y_range.hi += (y_range.hi - y_range.lo) * box.height / (1 - box.height);
  return Corner::kTopRight;
}

}  // namespace tp::detail
