#include "image_pipeline.h"

#include <algorithm>
#include <cmath>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "pixel_io.h"
#include "rng.h"
#include "tp/cpp/guard.h"

namespace tp::image_folder {
namespace {

using tp::cpp::Failure;

/// A crop rectangle in original-image pixel units (may be fractional) and the output size.
struct Plan {
  double x = 0, y = 0, w = 0, h = 0;
  Size2 out;
};

/// torchvision.transforms.RandomResizedCrop.get_params as a Plan.
Plan random_resized_crop(int height, int width, const TransformOptions& o, Rng& rng) {
  const CropBox box = random_resized_crop_box(height, width, o.scale, o.ratio, rng);
  Plan p;
  p.out = o.random_resized_crop;
  p.x = box.x;
  p.y = box.y;
  p.w = box.w;
  p.h = box.h;
  return p;
}

/// resize then center_crop, expressed as one crop of the original followed by one resize: the
/// resized image is never built, only the pixels that survive the crop are interpolated.
Plan resize_center_crop(int height, int width, const TransformOptions& o, const std::string& path) {
  Size2 resized{height, width};
  if (o.resize_short > 0) {
    const bool portrait = height >= width;
    const int shorter = portrait ? width : height, longer = portrait ? height : width;
    const int new_long = static_cast<int>(static_cast<int64_t>(o.resize_short) * longer / shorter);
    resized = portrait ? Size2{new_long, o.resize_short} : Size2{o.resize_short, new_long};
  } else if (o.resize.set()) {
    resized = o.resize;
  }
  Plan p;
  p.w = width;
  p.h = height;
  p.out = resized;
  if (o.center_crop.set()) {
    if (o.center_crop.h > resized.h || o.center_crop.w > resized.w)
      throw Failure(TP_ERR_CONFIG, std::string(o.component) + ": center_crop " + std::to_string(o.center_crop.h) + "x" +
                                       std::to_string(o.center_crop.w) + " is larger than '" + path + "' after resize (" +
                                       std::to_string(resized.h) + "x" + std::to_string(resized.w) +
                                       "); raise `resize` or lower `center_crop`");
    const double top = std::round((resized.h - o.center_crop.h) / 2.0);
    const double left = std::round((resized.w - o.center_crop.w) / 2.0);
    const double sy = static_cast<double>(height) / resized.h, sx = static_cast<double>(width) / resized.w;
    p.y = top * sy;
    p.x = left * sx;
    p.h = o.center_crop.h * sy;
    p.w = o.center_crop.w * sx;
    p.out = o.center_crop;
  }
  return p;
}

/// 1, 2, 4 or 8: the largest JPEG DCT scale-down that still leaves at least as many pixels as the
/// output in both directions, so the final resize never upsamples because of it.
int reduction_for(const Plan& p) {
  for (int r : {8, 4, 2}) {
    if (p.w / r >= p.out.w && p.h / r >= p.out.h) return r;
  }
  return 1;
}

int reduced_flag(int r) {
  switch (r) {
    case 2: return cv::IMREAD_REDUCED_COLOR_2;
    case 4: return cv::IMREAD_REDUCED_COLOR_4;
    case 8: return cv::IMREAD_REDUCED_COLOR_8;
    default: return cv::IMREAD_COLOR;
  }
}

}  // namespace

Image load_image(const std::string& path, const TransformOptions& o, uint64_t seed) {
  return transform_image(read_image_file(path, o.component, o.max_image_pixels), path, o, seed);
}

Image transform_image(const std::vector<unsigned char>& bytes, const std::string& path, const TransformOptions& o,
                      uint64_t seed) {
  check_image_bytes(bytes, path, o.component, o.max_image_pixels);
  // 1. The original size: from the JPEG header when possible (so the decode can be reduced),
  //    else by decoding at full size.
  cv::Mat full;
  int height = 0, width = 0;
  if (!jpeg_size(bytes.data(), bytes.size(), &height, &width)) {
    full = decode_bgr(bytes, cv::IMREAD_COLOR, path, o.component);
    height = full.rows;
    width = full.cols;
  }
  // 2. Geometry in original pixels; every random draw depends only on (seed, original size).
  Plan plan;
  if (o.random && o.random_resized_crop.set()) {
    Rng rng(seed, kTagCrop);
    plan = random_resized_crop(height, width, o, rng);
  } else {
    plan = resize_center_crop(height, width, o, path);
  }
  // 3. Decode (reduced for JPEG when the crop is much larger than the output).
  if (full.empty()) {
    const int r = o.fast_decode ? reduction_for(plan) : 1;
    full = decode_bgr(bytes, reduced_flag(r), path, o.component);
  }
  const double sx = static_cast<double>(full.cols) / width, sy = static_cast<double>(full.rows) / height;
  const int x0 = std::clamp(static_cast<int>(std::lround(plan.x * sx)), 0, full.cols - 1);
  const int y0 = std::clamp(static_cast<int>(std::lround(plan.y * sy)), 0, full.rows - 1);
  const int x1 = std::clamp(static_cast<int>(std::lround((plan.x + plan.w) * sx)), x0 + 1, full.cols);
  const int y1 = std::clamp(static_cast<int>(std::lround((plan.y + plan.h) * sy)), y0 + 1, full.rows);
  const cv::Mat roi = full(cv::Rect(x0, y0, x1 - x0, y1 - y0));
  // 4. One resize on 8-bit pixels (3 bytes per pixel instead of 12 for float): area averaging
  //    when shrinking (antialiased, like torchvision's antialias=True), bilinear otherwise.
  cv::Mat sized = resize_bgr(roi, plan.out.h, plan.out.w);
  // 5. RandAugment / TrivialAugment on 8-bit pixels, after the flip as in a torchvision recipe;
  //    the flip is then done here (one extra copy) rather than in the write pass.
  bool flip = o.random && o.hflip > 0.0 && Rng(seed, kTagFlip).uniform() < o.hflip;
  if (o.random) {
    const std::vector<AugStep> steps = plan_augment(o.augment, sized.rows, sized.cols, seed);
    if (!steps.empty()) {
      cv::Mat img = sized;
      if (flip) cv::flip(sized, img, 1);
      sized = apply_augment(img, steps);
      flip = false;
    }
  }
  // 6. Flip, jitter, normalise: one pass into the output buffer.
  Image out;
  out.h = plan.out.h;
  out.w = plan.out.w;
  out.pixels.resize(static_cast<std::size_t>(3) * out.h * out.w);
  const bool jitter = o.random && (o.brightness > 0 || o.contrast > 0 || o.saturation > 0);
  const JitterFactors factors = draw_jitter(o.brightness, o.contrast, o.saturation, seed);
  write_pixels(sized, flip, PixelFormat{o.mean, o.std, o.channels_last}, jitter ? &factors : nullptr,
               out.pixels.data());
  // 7. Random erasing on the normalised floats, as torchvision places it after Normalize.
  if (o.random) random_erase(out.pixels.data(), out.h, out.w, o.channels_last, o.erasing, seed);
  return out;
}

}  // namespace tp::image_folder
