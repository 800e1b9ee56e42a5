// The pixel-value ops of RandAugment / TrivialAugmentWide on 8-bit BGR, as
// torchvision.transforms.v2.functional computes them on uint8 RGB tensors: blends in float32
// (`a * ratio + b * (1 - ratio)`, clamped to [0, 255], then truncated by the cast to uint8, not
// rounded), grey levels 0.2989 R + 0.587 G + 0.114 B floored, the contrast mean over the whole
// grey image, sharpness leaving the one-pixel border, per-channel autocontrast and equalize with
// torchvision's (PIL's) lookup-table rule. OpenCV stores B, G, R: channel 2 is red.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include <opencv2/core.hpp>

#include "augment_ops.h"

namespace tp::datasets {
namespace {

/// uint8(clamp(v, 0, 255)): torchvision's `.clamp_(0, bound).to(uint8)`, which truncates.
unsigned char to_u8(float v) { return static_cast<unsigned char>(std::clamp(v, 0.f, 255.f)); }

/// floor(0.2989 R + 0.587 G + 0.114 B) in float32; torch computes r * 0.2989 and then adds the
/// others with `add_(x, alpha)`, a fused multiply-add in its vectorised kernel.
float grey_floor(const unsigned char* bgr) {
  float g = static_cast<float>(bgr[2]) * 0.2989f;
  g = std::fma(static_cast<float>(bgr[1]), 0.587f, g);
  g = std::fma(static_cast<float>(bgr[0]), 0.114f, g);
  return std::floor(g);
}

/// Calls f(pixel) for each pixel of a continuous 8-bit 3-channel image.
template <class F>
void each_pixel(cv::Mat& img, F f) {
  const std::size_t n = img.total();
  unsigned char* p = img.data;
  for (std::size_t i = 0; i < n; ++i) f(p + 3 * i);
}

/// _blend(image, other, ratio) with `other` a per-pixel grey (Color) or one value (Contrast):
/// uint8(clamp(v * ratio + other * (1 - ratio))).
void blend(cv::Mat& img, double ratio, const float* other_per_pixel, float other) {
  const auto r = static_cast<float>(ratio), alpha = static_cast<float>(1.0 - ratio);
  const std::size_t n = img.total();
  unsigned char* p = img.data;
  for (std::size_t i = 0; i < n; ++i) {
    const float o = other_per_pixel ? other_per_pixel[i] : other;
    for (int c = 0; c < 3; ++c) p[3 * i + c] = to_u8(std::fma(o, alpha, static_cast<float>(p[3 * i + c]) * r));
  }
}

/// adjust_sharpness: interior pixels blend with round(3x3 blur, weights 1/13 and 5/13 centre);
/// the one-pixel border is kept (images of height or width <= 2 are returned unchanged).
void sharpness(cv::Mat& img, double factor) {
  const int h = img.rows, w = img.cols;
  if (h <= 2 || w <= 2) return;
  const cv::Mat src = img.clone();
  const float a = 1.f / 13.f, b = 5.f / 13.f, alpha = static_cast<float>(1.0 - factor);
  for (int y = 1; y < h - 1; ++y) {
    const unsigned char* rows[3] = {src.ptr<unsigned char>(y - 1), src.ptr<unsigned char>(y), src.ptr<unsigned char>(y + 1)};
    unsigned char* out = img.ptr<unsigned char>(y);
    for (int x = 1; x < w - 1; ++x) {
      for (int c = 0; c < 3; ++c) {
        float sum = 0.f;
        for (int dy = 0; dy < 3; ++dy)
          for (int dx = -1; dx <= 1; ++dx) sum += static_cast<float>(rows[dy][3 * (x + dx) + c]) * ((dy == 1 && dx == 0) ? b : a);
        // k / 13 is never within float error of a .5 boundary, so this rounding is exact.
        const float blurred = std::nearbyint(sum);
        const auto v = static_cast<float>(rows[1][3 * x + c]);
        out[3 * x + c] = to_u8(std::fma(blurred - v, alpha, v));
      }
    }
  }
}

/// autocontrast: per channel, (v - min) / ((max - min) / 255) in float32, truncated; a flat
/// channel is left as is.
void autocontrast(cv::Mat& img) {
  for (int c = 0; c < 3; ++c) {
    int lo = 255, hi = 0;
    each_pixel(img, [&](unsigned char* p) { lo = std::min<int>(lo, p[c]); hi = std::max<int>(hi, p[c]); });
    if (lo == hi) continue;
    const float inv_scale = static_cast<float>(hi - lo) * static_cast<float>(1.0 / 255.0);
    const auto flo = static_cast<float>(lo);
    each_pixel(img, [&](unsigned char* p) { p[c] = to_u8((static_cast<float>(p[c]) - flo) / inv_scale); });
  }
}

/// equalize: per channel, step = (n - count of the largest present value) / 255 (floor); when
/// step is 0 the channel is kept, else lut[0] = 0, lut[k] = min(255, (cdf[k-1] + step / 2) / step).
void equalize(cv::Mat& img) {
  const auto n = static_cast<int64_t>(img.total());
  for (int c = 0; c < 3; ++c) {
    std::array<int64_t, 256> hist{};
    each_pixel(img, [&](unsigned char* p) { ++hist[p[c]]; });
    int last = 255;
    while (hist[last] == 0) --last;
    const int64_t step = (n - hist[last]) / 255;
    if (step == 0) continue;
    std::array<unsigned char, 256> lut{};
    int64_t cdf = 0;
    for (int k = 1; k < 256; ++k) {
      cdf += hist[k - 1];
      lut[k] = static_cast<unsigned char>(std::min<int64_t>(255, (cdf + step / 2) / step));
    }
    each_pixel(img, [&](unsigned char* p) { p[c] = lut[p[c]]; });
  }
}

}  // namespace

const char* aug_op_name(AugOp op) {
  static constexpr const char* kNames[kAugOpCount] = {
      "Identity",   "ShearX", "ShearY",    "TranslateX", "TranslateY",   "Rotate",  "Brightness",
      "Color",      "Contrast", "Sharpness", "Posterize",  "Solarize", "AutoContrast", "Equalize"};
  const int i = static_cast<int>(op);
  return i >= 0 && i < kAugOpCount ? kNames[i] : "?";
}

cv::Mat apply_aug_op(const cv::Mat& bgr, AugOp op, double magnitude) {
  switch (op) {
    case AugOp::kShearX:
    case AugOp::kShearY:
    case AugOp::kTranslateX:
    case AugOp::kTranslateY:
    case AugOp::kRotate: return apply_geometric_op(bgr, op, magnitude);
    default: break;
  }
  cv::Mat img = bgr.clone();  // continuous copy
  switch (op) {
    case AugOp::kBrightness: {
      const auto f = static_cast<float>(1.0 + magnitude);
      each_pixel(img, [&](unsigned char* p) { for (int c = 0; c < 3; ++c) p[c] = to_u8(static_cast<float>(p[c]) * f); });
      break;
    }
    case AugOp::kColor: {
      std::vector<float> grey(img.total());
      std::size_t i = 0;
      each_pixel(img, [&](unsigned char* p) { grey[i++] = grey_floor(p); });
      blend(img, 1.0 + magnitude, grey.data(), 0.f);
      break;
    }
    case AugOp::kContrast: {
      // torch.mean of the floored grey image in float32: exact while the sum stays below 2^24.
      int64_t sum = 0;
      each_pixel(img, [&](unsigned char* p) { sum += static_cast<int64_t>(grey_floor(p)); });
      const float mean = static_cast<float>(sum) / static_cast<float>(img.total());
      blend(img, 1.0 + magnitude, nullptr, mean);
      break;
    }
    case AugOp::kSharpness: sharpness(img, 1.0 + magnitude); break;
    case AugOp::kPosterize: {
      const int bits = static_cast<int>(magnitude);
      if (bits >= 8) break;
      const auto mask = static_cast<unsigned char>(((1 << bits) - 1) << (8 - bits));
      each_pixel(img, [&](unsigned char* p) { for (int c = 0; c < 3; ++c) p[c] &= mask; });
      break;
    }
    case AugOp::kSolarize: {
      // image >= threshold compares in float32 (uint8 tensor against a Python float).
      const auto threshold = static_cast<float>(255.0 * magnitude);
      each_pixel(img, [&](unsigned char* p) {
        for (int c = 0; c < 3; ++c)
          if (static_cast<float>(p[c]) >= threshold) p[c] = static_cast<unsigned char>(255 - p[c]);
      });
      break;
    }
    case AugOp::kAutoContrast: autocontrast(img); break;
    case AugOp::kEqualize: equalize(img); break;
    default: break;  // Identity
  }
  return img;
}

}  // namespace tp::datasets
