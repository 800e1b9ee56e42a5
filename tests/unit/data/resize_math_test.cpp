// data.decode = "gpu" without a GPU: the device pass's per-pixel arithmetic (resize_math.h, which
// resize_kernel.cu runs on every output pixel) against OpenCV's cv::resize, the call the CPU path
// makes (pixel_io.cpp's resize_bgr: INTER_AREA when the crop shrinks in both directions, else
// INTER_LINEAR). Random 8-bit images, crops and output sizes: shrinking by integer and fractional
// factors (2x, 2.3x, 7.9x, a crop at the image's edge), enlarging, and one axis each way. OpenCV
// computes INTER_LINEAR in fixed point, which the device mirrors as x86's vector code computes it: every level is
// within one of OpenCV's and 99.5% equal (measured: INTER_AREA exactly equal, INTER_LINEAR 0.1-0.3% one
// level apart).
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

#include "data/device_decode/resize_math.h"

#include <doctest/doctest.h>

namespace {

struct Case {
  int src_w, src_h, x0, y0, crop_w, crop_h, out_w, out_h;
};

/// Levels that differ, and the largest difference, between resize_pixel and cv::resize on `c`.
void compare(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  cv::Mat src(c.src_h, c.src_w, CV_8UC3);
  // Photograph-like: smooth gradients plus noise, so the averages land between levels.
  for (int y = 0; y < c.src_h; ++y)
    for (int x = 0; x < c.src_w; ++x)
      for (int ch = 0; ch < 3; ++ch)
        src.at<cv::Vec3b>(y, x)[ch] = static_cast<uint8_t>((x * 3 + y * 5 + ch * 40 + static_cast<int>(rng() % 60)) % 256);
  const cv::Mat crop = src(cv::Rect(c.x0, c.y0, c.crop_w, c.crop_h));
  const bool shrink = c.crop_w >= c.out_w && c.crop_h >= c.out_h;
  cv::Mat expected;
  cv::resize(crop, expected, cv::Size(c.out_w, c.out_h), 0, 0, shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
  int differ = 0, worst = 0;
  for (int oy = 0; oy < c.out_h; ++oy)
    for (int ox = 0; ox < c.out_w; ++ox) {
      float level[3];
      tp::device_decode::resize_pixel(src.data, static_cast<int>(src.step), c.x0, c.y0, c.crop_w, c.crop_h, c.out_w,
                                      c.out_h, ox, oy, level);
      for (int ch = 0; ch < 3; ++ch) {
        const int d = std::abs(static_cast<int>(level[ch]) - expected.at<cv::Vec3b>(oy, ox)[ch]);
        differ += d > 0 ? 1 : 0;
        worst = d > worst ? d : worst;
      }
    }
  const int levels = 3 * c.out_w * c.out_h;
  INFO("crop " << c.crop_w << "x" << c.crop_h << " at " << c.x0 << "," << c.y0 << " of " << c.src_w << "x"
               << c.src_h << " -> " << c.out_w << "x" << c.out_h << ": " << differ << " of " << levels
               << " levels differ, by at most " << worst);
  CHECK(worst <= 1);
  CHECK(differ <= levels / 200);
}

}  // namespace

TEST_CASE("the device resize's arithmetic is OpenCV's: INTER_AREA when shrinking") {
  compare({448, 448, 0, 0, 448, 448, 224, 224}, 1);   // 2x exactly (OpenCV's fast integer path)
  compare({500, 375, 13, 7, 460, 300, 224, 224}, 2);  // 2.05 x 1.34
  compare({500, 375, 0, 0, 500, 375, 224, 224}, 3);   // 2.23 x 1.67, the whole image
  compare({1800, 1800, 3, 11, 1770, 1777, 224, 224}, 4);  // 7.9x
  compare({300, 200, 69, 0, 231, 200, 224, 200}, 5);  // a crop at the right edge, the height kept
}

TEST_CASE("the device resize's arithmetic is OpenCV's: INTER_LINEAR when enlarging either axis") {
  compare({120, 90, 5, 5, 100, 80, 224, 224}, 6);     // enlarging both
  compare({500, 120, 10, 0, 400, 120, 224, 224}, 7);  // shrinking x, enlarging y
  compare({64, 64, 0, 0, 64, 64, 224, 224}, 8);
  compare({224, 224, 0, 0, 224, 224, 224, 224}, 9);   // the same size: a copy
}
