// The geometry of a chart, decided before PLplot is called: axis ranges, tick spacing and tick
// text, line decimation and where the legend goes. Pure functions, no PLplot.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "chart.h"

namespace tp::detail {

/// A closed interval on one axis, grown point by point.
struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  /// Widens the range to include `v` (finite).
  void add(double v);
  /// Makes the range drawable: empty -> [0, 1]; a single value (or values equal to 9 digits)
  /// -> a band of 10% around it, or +-1 around a value below 1e-100; otherwise `margin` of the
  /// span added on each side.
  void finish(double margin);
  /// Where `v` lies, 0 at `lo` and 1 at `hi`.
  double fraction(double v) const { return (v - lo) / (hi - lo); }
};

/// Reduces a line with more than 2 x `columns` points to each pixel column's minimum and
/// maximum, kept in their original order, so the polyline covers the same pixels: 10k noisy
/// steps become ~2k points on a 1000-pixel plot, a million steps the same ~2k. NaN gaps are
/// kept. `x_range` must be finished (non-empty).
Series decimate(const Series& series, const Range& x_range, int columns);

/// Tick spacing and how tick labels are written.
struct Ticks {
  double step = 1;
  int decimals = 0;         ///< digits after the point (fixed) or of the mantissa (scientific)
  bool scientific = false;
};

/// About `target` ticks over [lo, hi] at 1, 2 or 5 times a power of ten, labelled with just
/// enough digits to tell neighbours apart; scientific notation when a value reaches
/// `fixed_limit` or the step is below 1e-5. `lo` < `hi`.
/// Rationale: PLplot's own labels factor a shared exponent out into a "(x10^-4)" note in a
/// corner, which is easy to miss and is cut off at small margins.
Ticks choose_ticks(double lo, double hi, double target, double fixed_limit);

/// The label of the tick at `value`: "0.0003", "120000", "1.5e-08", and "0" for zero (never
/// "-0" or a rounding residue such as "5.6e-17").
std::string tick_text(const Ticks& ticks, double value);

/// A corner inside the plot area.
enum class Corner { kTopRight, kBottomRight, kTopLeft, kBottomLeft };

/// Picks the legend's corner: the first one (top right, bottom right, top left, bottom left)
/// with no point of `series` under the legend's estimated box. When every corner has points,
/// raises `y_range.hi` to make an empty band at the top and returns Corner::kTopRight.
Corner place_legend(const std::vector<Series>& series, const Range& x_range, Range& y_range);

}  // namespace tp::detail
