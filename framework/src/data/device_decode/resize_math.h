// The arithmetic of data.decode = "gpu"'s device pass, per output pixel: OpenCV's cv::resize as
// the CPU path calls it (plugins/datasets/common/pixel_io.cpp, resize_bgr: INTER_AREA when the
// crop shrinks in both directions, INTER_LINEAR when it grows, and INTER_AREA then INTER_LINEAR
// when one side shrinks and the other grows), on 8-bit RGB. Host and device code alike:
// the kernel (resize_kernel.cu) runs it, and a CPU test holds it against cv::resize itself
// (tests/unit/data/resize_math_test.cpp), so the two paths' pixels are compared without a GPU.
#pragma once

#include <math.h>
#include <stdint.h>

#include "util/host_device.h"

namespace tp::device_decode {

TP_HOST_DEVICE inline int smaller(int a, int b) { return a < b ? a : b; }

/// One axis of cv::INTER_AREA, as imgproc's computeResizeAreaTab builds it: output cell `d` covers
/// source [d * scale, d * scale + scale); the pixels it overlaps in part get their overlap, the
/// whole ones 1, each divided by the cell's width (clipped at the source's end).
struct AreaCell {
  double start, end, width;
  int whole_first, whole_end;  ///< whole pixels [whole_first, whole_end)
  int first, last;             ///< every pixel with a weight, inclusive
};

TP_HOST_DEVICE inline AreaCell area_cell(int d, double scale, int size) {
  AreaCell c;
  c.start = d * scale;
  c.end = c.start + scale;
  c.width = fmin(scale, size - c.start);
  const int s2 = smaller(static_cast<int>(floor(c.end)), size - 1);
  const int s1 = smaller(static_cast<int>(ceil(c.start)), s2);
  c.whole_first = s1;
  c.whole_end = s2;
  c.first = s1 - c.start > 1e-3 ? s1 - 1 : s1;
  c.last = c.end - s2 > 1e-3 ? s2 : s2 - 1;
  return c;
}

/// Source pixel `s`'s weight in cell `c` (computeResizeAreaTab's alpha).
TP_HOST_DEVICE inline float area_weight(const AreaCell& c, int s) {
  if (s == c.whole_first - 1 && c.whole_first - c.start > 1e-3)
    return static_cast<float>((c.whole_first - c.start) / c.width);
  if (s >= c.whole_first && s < c.whole_end) return static_cast<float>(1.0 / c.width);
  if (s == c.whole_end && c.end - c.whole_end > 1e-3)
    return static_cast<float>(fmin(fmin(c.end - c.whole_end, 1.0), c.width) / c.width);
  return 0.0F;
}

/// cv::INTER_LINEAR's taps on one axis for output index `d`, in imgproc's 8-bit fixed point: the
/// first source pixel, the second (clamped at the edge), and their weights out of 2048
/// (INTER_RESIZE_COEF_SCALE), as resize's coefficient table holds them.
TP_HOST_DEVICE inline void linear_taps(int d, double scale, int size, int* s0, int* s1, int* w0, int* w1) {
  float f = static_cast<float>((d + 0.5) * scale - 0.5);
  int s = static_cast<int>(floorf(f));
  f -= static_cast<float>(s);
  if (s < 0) {
    f = 0.0F;
    s = 0;
  }
  if (s >= size - 1) {
    f = 0.0F;
    s = size - 1;
  }
  *s0 = s;
  *s1 = smaller(s + 1, size - 1);
  // saturate_cast<short>((1 - f) * 2048): rounded to nearest.
  *w0 = static_cast<int>(rintf((1.0F - f) * 2048.0F));
  *w1 = 2048 - *w0;
}

/// cv::resize with INTER_AREA of the crop at `origin` (crop_w x crop_h, `pitch` bytes a row) to
/// out_w x out_h (each no larger than the crop's), at output (ox, oy): its integer-factor path
/// where both factors are whole (rounding half up at 2x as its 8-bit code does), else the
/// general one.
TP_HOST_DEVICE inline void area_pixel(const uint8_t* origin, int pitch, int crop_w, int crop_h, int out_w, int out_h,
                                      int ox, int oy, float level[3]) {
  if (crop_w % out_w == 0 && crop_h % out_h == 0) {
    // INTER_AREA by whole factors: the block's mean (imgproc's resizeAreaFast).
    const int fx = crop_w / out_w, fy = crop_h / out_h;
    int sum[3] = {0, 0, 0};
    for (int dy = 0; dy < fy; ++dy) {
      const uint8_t* row = origin + static_cast<int64_t>(oy * fy + dy) * pitch + 3 * ox * fx;
      for (int dx = 0; dx < fx; ++dx)
        for (int c = 0; c < 3; ++c) sum[c] += row[3 * dx + c];
    }
    for (int c = 0; c < 3; ++c)
      level[c] = fx == 2 && fy == 2 ? static_cast<float>((sum[c] + 2) >> 2)
                                    : fminf(rintf(static_cast<float>(sum[c]) * (1.0F / static_cast<float>(fx * fy))), 255.0F);
    return;
  }
  float acc[3] = {0.0F, 0.0F, 0.0F};
  const AreaCell cx = area_cell(ox, static_cast<double>(crop_w) / out_w, crop_w);
  const AreaCell cy = area_cell(oy, static_cast<double>(crop_h) / out_h, crop_h);
  for (int sy = cy.first; sy <= cy.last; ++sy) {
    const float wy = area_weight(cy, sy);
    const uint8_t* row = origin + static_cast<int64_t>(sy) * pitch;
    float line[3] = {0.0F, 0.0F, 0.0F};
    for (int sx = cx.first; sx <= cx.last; ++sx) {
      const float wx = area_weight(cx, sx);
      for (int c = 0; c < 3; ++c) line[c] += wx * row[3 * sx + c];
    }
    for (int c = 0; c < 3; ++c) acc[c] += wy * line[c];
  }
  for (int c = 0; c < 3; ++c) level[c] = fminf(fmaxf(rintf(acc[c]), 0.0F), 255.0F);
}

/// INTER_LINEAR's 8-bit fixed-point blend of four levels: p00 at (sx0, sy0), p01 at (sx1, sy0),
/// p10 at (sx0, sy1), p11 at (sx1, sy1), with horizontal weights a0 + a1 = 2048 and vertical
/// b0 + b1 = 2048 (linear_taps), as x86's vector code computes it.
TP_HOST_DEVICE inline float linear_blend(int p00, int p01, int p10, int p11, int a0, int a1, int b0, int b1) {
  const int h0 = p00 * a0 + p01 * a1;  // the rows' horizontal pass, x 2048
  const int h1 = p10 * a0 + p11 * a1;
  // VResizeLinearVec_32s8u: 16-bit high products of the weights and the rows shifted by 4, then
  // a rounding shift by 2.
  const int v = ((b0 * (h0 >> 4)) >> 16) + ((b1 * (h1 >> 4)) >> 16);
  return static_cast<float>(smaller((v + 2) >> 2, 255));
}

/// The resized 8-bit levels (R, G, B) at output (ox, oy) of the crop [x0, x0 + crop_w) x
/// [y0, y0 + crop_h) of `src` (RGB interleaved, `pitch` bytes a row) resized to out_w x out_h,
/// before any flip, as resize_bgr resizes on the CPU: cv::resize with INTER_AREA when shrinking
/// both ways (area_pixel), INTER_LINEAR (its fixed-point 8-bit arithmetic, linear_blend) when
/// enlarging, and when one side shrinks and the other grows, INTER_AREA along the shrinking side
/// to its size, rounded to 8 bits, then INTER_LINEAR along the other (the two cv::resize calls
/// of resize_bgr: four area pixels of the intermediate image per output pixel).
TP_HOST_DEVICE inline void resize_pixel(const uint8_t* src, int pitch, int x0, int y0, int crop_w, int crop_h,
                                        int out_w, int out_h, int ox, int oy, float level[3]) {
  const uint8_t* origin = src + static_cast<int64_t>(y0) * pitch + 3 * x0;
  if (crop_w == out_w && crop_h == out_h) {
    const uint8_t* px = origin + static_cast<int64_t>(oy) * pitch + 3 * ox;
    for (int c = 0; c < 3; ++c) level[c] = px[c];
    return;
  }
  if (crop_w >= out_w && crop_h >= out_h) {
    area_pixel(origin, pitch, crop_w, crop_h, out_w, out_h, ox, oy, level);
    return;
  }
  // The image the linear pass reads: the crop itself, or the crop area-shrunk along one side.
  const bool mixed = crop_w > out_w || crop_h > out_h;
  const int mid_w = smaller(crop_w, out_w), mid_h = smaller(crop_h, out_h);
  int sx0 = 0, sx1 = 0, sy0 = 0, sy1 = 0, a0 = 0, a1 = 0, b0 = 0, b1 = 0;
  linear_taps(ox, static_cast<double>(mid_w) / out_w, mid_w, &sx0, &sx1, &a0, &a1);
  linear_taps(oy, static_cast<double>(mid_h) / out_h, mid_h, &sy0, &sy1, &b0, &b1);
  float p[4][3];
  const int xs[4] = {sx0, sx1, sx0, sx1}, ys[4] = {sy0, sy0, sy1, sy1};
  for (int k = 0; k < 4; ++k) {
    if (mixed) {
      area_pixel(origin, pitch, crop_w, crop_h, mid_w, mid_h, xs[k], ys[k], p[k]);
    } else {
      const uint8_t* px = origin + static_cast<int64_t>(ys[k]) * pitch + 3 * xs[k];
      for (int c = 0; c < 3; ++c) p[k][c] = px[c];
    }
  }
  for (int c = 0; c < 3; ++c)
    level[c] = linear_blend(static_cast<int>(p[0][c]), static_cast<int>(p[1][c]), static_cast<int>(p[2][c]),
                            static_cast<int>(p[3][c]), a0, a1, b0, b1);
}

}  // namespace tp::device_decode
