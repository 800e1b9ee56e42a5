#include "pil_resample.h"

#include <algorithm>
#include <cmath>

namespace tp::datasets {
namespace {

/// Resample.c's PRECISION_BITS: 32 - 8 bits of pixel - 2 bits of headroom for the cubic's lobes.
constexpr int kPrecisionBits = 22;

/// Keys' cubic convolution kernel with a = -0.5 (Resample.c's bicubic_filter), support 2. The
/// expressions are PIL's, term for term, so the doubles (and the rounded weights) are the same.
double bicubic(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

/// A sum of weighted pixels (with the rounding half added) to 0..255: Resample.c's clip8 (a
/// table over sum >> 22 that saturates).
unsigned char clip8(int32_t sum) {
  const int32_t v = sum >> kPrecisionBits;
  return static_cast<unsigned char>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

}  // namespace

ResampleAxis bicubic_axis(int in_size, int out_size, int first, int count) {
  ResampleAxis axis;
  axis.count = count;
  axis.identity = in_size == out_size;
  if (axis.identity) {
    // PIL's weights here are 0, 1, 0, 0 around each pixel, so it skips the pass: each output
    // pixel is its input pixel, and only the window's own pixels are read.
    axis.ksize = 1;
    axis.first_in = first;
    axis.end_in = first + count;
    axis.taps.assign(static_cast<std::size_t>(count), 1);
    axis.weights.assign(static_cast<std::size_t>(count), 1 << kPrecisionBits);
    axis.start.resize(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) axis.start[static_cast<std::size_t>(i)] = i;
    return axis;
  }
  // precompute_coeffs with the box (0, in_size): float in0 = 0 adds nothing to the doubles.
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = 2.0 * filterscale;
  axis.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  const auto n = static_cast<std::size_t>(count);
  std::vector<int> xmins(n);
  axis.taps.resize(n);
  axis.weights.assign(n * static_cast<std::size_t>(axis.ksize), 0);
  std::vector<double> k(static_cast<std::size_t>(axis.ksize));
  for (int i = 0; i < count; ++i) {
    const int xx = first + i;
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    // (int) truncates toward zero, as PIL's "round the value"; a negative start clamps to 0 anyway.
    const int xmin = std::max(0, static_cast<int>(center - support + 0.5));
    const int xmax = std::min(in_size, static_cast<int>(center + support + 0.5)) - xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      const double w = bicubic((x + xmin - center + 0.5) * ss);
      k[static_cast<std::size_t>(x)] = w;
      ww += w;
    }
    int32_t* fixed = &axis.weights[static_cast<std::size_t>(i) * static_cast<std::size_t>(axis.ksize)];
    for (int x = 0; x < xmax; ++x) {
      double w = k[static_cast<std::size_t>(x)];
      if (ww != 0.0) w /= ww;
      // normalize_coeffs_8bpc: to 22 fractional bits, rounded half away from zero.
      fixed[x] = static_cast<int32_t>(w < 0 ? -0.5 + w * (1 << kPrecisionBits) : 0.5 + w * (1 << kPrecisionBits));
    }
    xmins[static_cast<std::size_t>(i)] = xmin;
    axis.taps[static_cast<std::size_t>(i)] = xmax;
  }
  // Output pixels read increasing windows, so the first one starts lowest and the last ends highest.
  axis.first_in = count > 0 ? xmins.front() : 0;
  axis.end_in = count > 0 ? xmins.back() + axis.taps.back() : 0;
  axis.start.resize(n);
  for (std::size_t i = 0; i < n; ++i) axis.start[i] = xmins[i] - axis.first_in;
  return axis;
}

bool pil_vertical_first(int in_w, int in_h, int out_w, int out_h) {
  const int64_t shrink_h = static_cast<int64_t>(in_h) - out_h, shrink_w = static_cast<int64_t>(in_w) - out_w;
  return shrink_h > 0 && shrink_h > shrink_w * 2;
}

namespace {

/// One horizontal pass: each row of `in` (x.hi() - x.lo() columns) to x.count columns.
cv::Mat horizontal_pass(const cv::Mat& in, const ResampleAxis& x) {
  cv::Mat out(in.rows, x.count, CV_8UC3);
  for (int r = 0; r < in.rows; ++r) {
    const unsigned char* row = in.ptr<unsigned char>(r);
    unsigned char* dst = out.ptr<unsigned char>(r);
    for (int i = 0; i < x.count; ++i) {
      const int32_t* k = &x.weights[static_cast<std::size_t>(i) * static_cast<std::size_t>(x.ksize)];
      const unsigned char* p = row + 3 * x.start[static_cast<std::size_t>(i)];
      int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int t = 0; t < x.taps[static_cast<std::size_t>(i)]; ++t, p += 3) {
        s0 += p[0] * k[t];
        s1 += p[1] * k[t];
        s2 += p[2] * k[t];
      }
      dst[3 * i] = clip8(s0);
      dst[3 * i + 1] = clip8(s1);
      dst[3 * i + 2] = clip8(s2);
    }
  }
  return out;
}

/// One vertical pass: `in` (y.hi() - y.lo() rows) to y.count rows, row by row into 32-bit sums
/// (PIL's integer sums, added in another order: the same values, no overflow).
cv::Mat vertical_pass(const cv::Mat& in, const ResampleAxis& y) {
  cv::Mat out(y.count, in.cols, CV_8UC3);
  const auto width = static_cast<std::size_t>(3 * in.cols);
  std::vector<int32_t> sums(width);
  for (int j = 0; j < y.count; ++j) {
    const int32_t* k = &y.weights[static_cast<std::size_t>(j) * static_cast<std::size_t>(y.ksize)];
    const int first = y.start[static_cast<std::size_t>(j)], taps = y.taps[static_cast<std::size_t>(j)];
    std::fill(sums.begin(), sums.end(), 1 << (kPrecisionBits - 1));
    for (int t = 0; t < taps; ++t) {
      const unsigned char* row = in.ptr<unsigned char>(first + t);
      const int32_t w = k[t];
      for (std::size_t c = 0; c < width; ++c) sums[c] += row[c] * w;
    }
    unsigned char* dst = out.ptr<unsigned char>(j);
    for (std::size_t c = 0; c < width; ++c) dst[c] = clip8(sums[c]);
  }
  return out;
}

}  // namespace

cv::Mat resample_bicubic(const cv::Mat& src, const ResampleAxis& x, const ResampleAxis& y, bool vertical_first) {
  CV_Assert(src.type() == CV_8UC3 && src.cols == x.hi() - x.lo() && src.rows == y.hi() - y.lo());
  // Each pass rounds to 8 bits, so the order changes pixels; an identity axis has no pass.
  if (vertical_first) {
    const cv::Mat rows = y.identity ? src : vertical_pass(src, y);
    return x.identity ? rows : horizontal_pass(rows, x);
  }
  const cv::Mat cols = x.identity ? src : horizontal_pass(src, x);
  return y.identity ? cols : vertical_pass(cols, y);
}

}  // namespace tp::datasets
