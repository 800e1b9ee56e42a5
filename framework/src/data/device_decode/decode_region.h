// data.decode = "gpu": the part of an image nvJPEG's engines decode for one crop (their ROI
// decode), so that they convert and write fewer pixels and the device pass reads fewer. Plain C++
// (no CUDA, no LibTorch): the decoder uses it, and tests/unit/data checks it on every CI run.
#pragma once

#include <algorithm>

namespace tp::device_decode {

/// The region decoded around a crop: widened by a margin and aligned to JPEG's largest block (16
/// pixels: an MCU at 4:2:0), so that chroma interpolation at the region's edges reads the
/// neighbours it reads in a whole-image decode and the crop's pixels equal that decode's.
constexpr int kRegionAlign = 16;
constexpr int kRegionMargin = 16;

/// A rectangle of an image: its top-left pixel and its size.
struct DecodeRegion {
  int x0, y0, width, height;
};

/// The region to decode for the crop [x0, x1) x [y0, y1) of a `width` x `height` image (the crop
/// inside it): the crop with kRegionMargin pixels more on each side, origin rounded down and end
/// rounded up to kRegionAlign, clipped to the image. The whole image where that covers it.
inline DecodeRegion region_around(int x0, int y0, int x1, int y1, int width, int height) {
  const auto down = [](int v) { return std::max(0, (v - kRegionMargin) / kRegionAlign * kRegionAlign); };
  const auto up = [](int v, int limit) {
    return std::min(limit, (v + kRegionMargin + kRegionAlign - 1) / kRegionAlign * kRegionAlign);
  };
  const int rx0 = down(x0), ry0 = down(y0);
  return {rx0, ry0, up(x1, width) - rx0, up(y1, height) - ry0};
}

}  // namespace tp::device_decode
