// data.decode = "gpu" without a GPU: the device pass's per-pixel arithmetic (resize_math.h, which
// resize_kernel.cu runs on every output pixel) against OpenCV's cv::resize, the call the CPU path
// makes (pixel_io.cpp's resize_bgr: INTER_AREA when the crop shrinks in both directions, else
// INTER_LINEAR; INTER_AREA then INTER_LINEAR when one side shrinks and the other grows). Random 8-bit images, crops and output sizes: shrinking by integer and fractional
// factors (2x, 2.3x, 7.9x, a crop at the image's edge), enlarging, and one axis each way. OpenCV
// computes INTER_LINEAR in fixed point, which the device mirrors as x86's vector code computes it: every level is
// within one of OpenCV's and 99.5% equal (measured: INTER_AREA exactly equal, INTER_LINEAR 0.1-0.3% one
// level apart). And the region nvJPEG's engines decode for a crop (decode_region.h): it holds the
// crop with a margin, aligned to JPEG's blocks, and the crop read from it in the region's
// coordinates (as image_decode_stage.cpp shifts it) resizes to the same pixels as from the whole image.
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

#include "data/device_decode/decode_region.h"
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
  const bool mixed = !shrink && (c.crop_w > c.out_w || c.crop_h > c.out_h);
  cv::Mat expected;
  if (mixed) {
    // resize_bgr's two passes: area along the shrinking side, then bilinear along the growing one.
    cv::Mat narrowed;
    cv::resize(crop, narrowed, cv::Size(std::min(c.crop_w, c.out_w), std::min(c.crop_h, c.out_h)), 0, 0,
               cv::INTER_AREA);
    cv::resize(narrowed, expected, cv::Size(c.out_w, c.out_h), 0, 0, cv::INTER_LINEAR);
  } else {
    cv::resize(crop, expected, cv::Size(c.out_w, c.out_h), 0, 0, shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
  }
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

TEST_CASE("the device resize's arithmetic is OpenCV's: INTER_LINEAR when enlarging, after INTER_AREA along a shrinking axis") {
  compare({120, 90, 5, 5, 100, 80, 224, 224}, 6);     // enlarging both
  compare({500, 120, 10, 0, 400, 120, 224, 224}, 7);  // shrinking x, enlarging y: area along x first
  compare({120, 500, 0, 10, 120, 400, 224, 224}, 10);  // enlarging x, shrinking y
  compare({700, 30, 0, 0, 690, 24, 32, 32}, 11);       // a text line: 21.6x along x (data trial F10)
  compare({64, 64, 0, 0, 64, 64, 224, 224}, 8);
  compare({224, 224, 0, 0, 224, 224, 224, 224}, 9);   // the same size: a copy
}

TEST_CASE("the decoded region holds its crop with a block-aligned margin, and the crop reads the same from it") {
  using tp::device_decode::kRegionAlign;
  using tp::device_decode::kRegionMargin;
  std::mt19937 rng(11);
  int partial = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int width = 17 + static_cast<int>(rng() % 900), height = 17 + static_cast<int>(rng() % 700);
    const int x0 = static_cast<int>(rng() % static_cast<uint32_t>(width));
    const int y0 = static_cast<int>(rng() % static_cast<uint32_t>(height));
    const int x1 = x0 + 1 + static_cast<int>(rng() % static_cast<uint32_t>(width - x0));
    const int y1 = y0 + 1 + static_cast<int>(rng() % static_cast<uint32_t>(height - y0));
    const tp::device_decode::DecodeRegion r = tp::device_decode::region_around(x0, y0, x1, y1, width, height);
    CAPTURE(width); CAPTURE(height); CAPTURE(x0); CAPTURE(y0); CAPTURE(x1); CAPTURE(y1);
    REQUIRE(r.x0 >= 0);
    REQUIRE(r.y0 >= 0);
    REQUIRE(r.x0 + r.width <= width);
    REQUIRE(r.y0 + r.height <= height);
    CHECK(r.x0 % kRegionAlign == 0);
    CHECK(r.y0 % kRegionAlign == 0);
    CHECK(((r.x0 + r.width) % kRegionAlign == 0 || r.x0 + r.width == width));
    CHECK(((r.y0 + r.height) % kRegionAlign == 0 || r.y0 + r.height == height));
    CHECK(r.x0 <= std::max(0, x0 - kRegionMargin));
    CHECK(r.y0 <= std::max(0, y0 - kRegionMargin));
    CHECK(r.x0 + r.width >= std::min(width, x1 + kRegionMargin));
    CHECK(r.y0 + r.height >= std::min(height, y1 + kRegionMargin));
    if (r.width < width || r.height < height) ++partial;
  }
  CHECK(partial > 1000);  // most random crops leave part of the image undecoded

  // A 500 x 375 image, a RandomResizedCrop-like box: every output pixel the same from the region.
  cv::Mat src(375, 500, CV_8UC3);
  for (int y = 0; y < src.rows; ++y)
    for (int x = 0; x < src.cols; ++x)
      for (int ch = 0; ch < 3; ++ch) src.at<cv::Vec3b>(y, x)[ch] = static_cast<uint8_t>((x * 7 + y * 3 + ch * 50 + rng() % 40) % 256);
  const int x0 = 133, y0 = 61, x1 = 371, y1 = 290, out = 224;
  const tp::device_decode::DecodeRegion r = tp::device_decode::region_around(x0, y0, x1, y1, src.cols, src.rows);
  const cv::Mat region = src(cv::Rect(r.x0, r.y0, r.width, r.height)).clone();
  int differ = 0;
  for (int oy = 0; oy < out; ++oy)
    for (int ox = 0; ox < out; ++ox) {
      float whole[3], part[3];
      tp::device_decode::resize_pixel(src.data, static_cast<int>(src.step), x0, y0, x1 - x0, y1 - y0, out, out, ox, oy,
                                      whole);
      tp::device_decode::resize_pixel(region.data, static_cast<int>(region.step), x0 - r.x0, y0 - r.y0, x1 - x0, y1 - y0,
                                      out, out, ox, oy, part);
      for (int ch = 0; ch < 3; ++ch) differ += whole[ch] != part[ch] ? 1 : 0;
    }
  CHECK(differ == 0);
}
