#include "image_pipeline.h"

#include <algorithm>
#include <cmath>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "jpeg_crop.h"
#include "pil_resample.h"
#include "pixel_io.h"
#include "rng.h"
#include "tp/cpp/guard.h"

namespace tp::datasets {
namespace {

using tp::cpp::Failure;

/// A crop rectangle in original-image pixel units (may be fractional), the output size and the
/// flip: everything random about an image's geometry, drawn before any pixel is decoded.
struct Plan {
  double x = 0, y = 0, w = 0, h = 0;
  Size2 out;
  bool flip = false;
  // The same geometry as torchvision applies it to a PIL image, for interpolation = "bicubic":
  // the whole-pixel box `src` of the original resized to `resized`, of which the output is the
  // window of size `out` at (top, left). (The bilinear path keeps its fractional crop above.)
  CropBox src;
  Size2 resized;
  int top = 0, left = 0;
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
  p.src = box;  // torchvision's resized_crop: crop, then resize the crop to the output
  p.resized = p.out;
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
  p.src = CropBox{0, 0, width, height};
  p.resized = resized;
  if (o.center_crop.set()) {
    if (o.center_crop.h > resized.h || o.center_crop.w > resized.w)
      throw Failure(TP_ERR_CONFIG, std::string(o.component) + ": center_crop " + std::to_string(o.center_crop.h) + "x" +
                                       std::to_string(o.center_crop.w) + " is larger than '" + path + "' after resize (" +
                                       std::to_string(resized.h) + "x" + std::to_string(resized.w) +
                                       "); raise `resize` or lower `center_crop`");
    // Python's round(), as torchvision's center_crop: a half goes to the even neighbour (341 wide
    // to 224 starts at 58, not 59).
    const double top = std::nearbyint((resized.h - o.center_crop.h) / 2.0);
    const double left = std::nearbyint((resized.w - o.center_crop.w) / 2.0);
    const double sy = static_cast<double>(height) / resized.h, sx = static_cast<double>(width) / resized.w;
    p.y = top * sy;
    p.x = left * sx;
    p.h = o.center_crop.h * sy;
    p.w = o.center_crop.w * sx;
    p.out = o.center_crop;
    p.top = static_cast<int>(top);
    p.left = static_cast<int>(left);
  }
  return p;
}

/// The horizontal flip of a train sample, drawn from its own stream (kTagFlip).
bool draw_flip(const TransformOptions& o, uint64_t seed) {
  return o.random && o.hflip > 0.0 && Rng(seed, kTagFlip).uniform() < o.hflip;
}

/// The geometry of one image of `height` x `width` original pixels: every random draw depends only
/// on (seed, original size), never on what is decoded, so the CPU path (transform_image) and the
/// host's decoder (encoded_box) cut the same crop from the same seed.
Plan draw_plan(int height, int width, const TransformOptions& o, uint64_t seed, const std::string& path) {
  Plan plan;
  if (o.random && o.random_resized_crop.set()) {
    Rng rng(seed, kTagCrop);
    plan = random_resized_crop(height, width, o, rng);
  } else {
    plan = resize_center_crop(height, width, o, path);
  }
  plan.flip = draw_flip(o, seed);
  return plan;
}

/// The plan's crop in whole pixels of a decode of `cols` x `rows` of the `height` x `width`
/// original (a reduced JPEG decode scales it down; at full scale, cols = width and rows = height,
/// it is the plan rounded): x0, y0 inclusive, x1, y1 exclusive, at least one pixel each way.
ImageBox crop_in(const Plan& plan, int height, int width, int cols, int rows) {
  const double sx = static_cast<double>(cols) / width, sy = static_cast<double>(rows) / height;
  ImageBox box;
  box.x0 = std::clamp(static_cast<int>(std::lround(plan.x * sx)), 0, cols - 1);
  box.y0 = std::clamp(static_cast<int>(std::lround(plan.y * sy)), 0, rows - 1);
  box.x1 = std::clamp(static_cast<int>(std::lround((plan.x + plan.w) * sx)), box.x0 + 1, cols);
  box.y1 = std::clamp(static_cast<int>(std::lround((plan.y + plan.h) * sy)), box.y0 + 1, rows);
  box.flip = plan.flip;
  box.height = height;
  box.width = width;
  return box;
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

/// Steps 3 and 4 of transform_image for interpolation = "bilinear": decode (reduced for a JPEG
/// when fast_decode and the crop allow), cut the plan's crop rounded to whole pixels, resize_bgr.
/// `full` is the whole decode when the size needed one, else empty.
cv::Mat bilinear_pixels(const std::vector<unsigned char>& bytes, cv::Mat full, const Plan& plan, int height, int width,
                        const TransformOptions& o, const std::string& path) {
  // A JPEG decodes only the crop's pixels (jpeg_crop.h: the pixels of the whole-image decode
  // below, bit for bit); what that does not take, and every other format, decodes whole, then crops.
  cv::Mat roi;
  if (full.empty()) {
    const int r = o.fast_decode ? reduction_for(plan) : 1;
    roi = decode_jpeg_crop(bytes, r, [&](int cols, int rows) {
      const ImageBox box = crop_in(plan, height, width, cols, rows);
      return PixelRect{box.x0, box.y0, box.x1, box.y1};
    });
    if (roi.empty()) full = decode_bgr(bytes, reduced_flag(r), path, o.component);
  }
  if (roi.empty()) {
    const ImageBox box = crop_in(plan, height, width, full.cols, full.rows);
    roi = full(cv::Rect(box.x0, box.y0, box.x1 - box.x0, box.y1 - box.y0));
  }
  // On 8-bit pixels (3 bytes per pixel instead of 12 for float): area averaging when shrinking
  // (antialiased, like torchvision's antialias=True), bilinear when enlarging, both in turn when
  // one side shrinks and the other grows (resize_bgr).
  return resize_bgr(roi, plan.out.h, plan.out.w);
}

/// Steps 3 and 4 for interpolation = "bicubic": PIL's resize of plan.src to plan.resized, only
/// the output window, from only the source pixels that window reads (a JPEG decodes just those).
/// Always at full scale: a reduced JPEG decode is a low-pass filter of its own, which a timm /
/// torchvision user's PIL decode does not apply, so fast_decode is the bilinear path's alone.
cv::Mat bicubic_pixels(const std::vector<unsigned char>& bytes, cv::Mat full, const Plan& plan, int height, int width,
                       const TransformOptions& o, const std::string& path) {
  const ResampleAxis ax = bicubic_axis(plan.src.w, plan.resized.w, plan.left, plan.out.w);
  const ResampleAxis ay = bicubic_axis(plan.src.h, plan.resized.h, plan.top, plan.out.h);
  const PixelRect need{plan.src.x + ax.lo(), plan.src.y + ay.lo(), plan.src.x + ax.hi(), plan.src.y + ay.hi()};
  cv::Mat roi;
  if (full.empty()) {
    roi = decode_jpeg_crop(bytes, 1, [&](int, int) { return need; });
    if (roi.empty()) full = decode_bgr(bytes, cv::IMREAD_COLOR, path, o.component);
  }
  if (roi.empty()) {
    // The plan was drawn from the header's size; a decode of another size has no such pixels.
    if (full.cols != width || full.rows != height)
      throw Failure(TP_ERR_IO, std::string(o.component) + ": '" + path + "' decodes to " + std::to_string(full.cols) +
                                   "x" + std::to_string(full.rows) + " pixels, not the " + std::to_string(width) + "x" +
                                   std::to_string(height) + " its header declares; fix or remove the file");
    roi = full(cv::Rect(need.x0, need.y0, need.x1 - need.x0, need.y1 - need.y0));
  }
  return resample_bicubic(roi, ax, ay,
                          pil_vertical_first(plan.src.w, plan.src.h, plan.resized.w, plan.resized.h));
}

}  // namespace

std::array<int32_t, 7> ImageBox::values() const {
  return {x0, y0, x1, y1, flip ? 1 : 0, height, width};
}

ImageBox encoded_box(const std::vector<unsigned char>& bytes, const std::string& name, const TransformOptions& o,
                     uint64_t seed) {
  check_image_bytes(bytes, name, o.component, o.max_image_pixels);
  int height = 0, width = 0;
  if (!jpeg_size(bytes.data(), bytes.size(), &height, &width)) {
    // The size needs a decode: the host asks for this sample's pixels instead (encoded_images = 0).
    ImageBox unknown;
    unknown.flip = draw_flip(o, seed);
    return unknown;
  }
  return crop_in(draw_plan(height, width, o, seed, name), height, width, width, height);
}

Image load_image(const std::string& path, const TransformOptions& o, uint64_t seed) {
  return transform_image(read_image_file(path, o.component, o.max_image_pixels, kMaxImageFileBytes), path, o, seed);
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
  const Plan plan = draw_plan(height, width, o, seed, path);
  // 3-4. Decode only what the crop needs (reduced for a bilinear JPEG when the crop is much
  //      larger than the output), then one resize on 8-bit pixels.
  cv::Mat sized = o.interpolation == Interpolation::kBicubic
                      ? bicubic_pixels(bytes, full, plan, height, width, o, path)
                      : bilinear_pixels(bytes, full, plan, height, width, o, path);
  // 5. RandAugment / TrivialAugment on 8-bit pixels, after the flip as in a torchvision recipe;
  //    the flip is then done here (one extra copy) rather than in the write pass.
  bool flip = plan.flip;
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

}  // namespace tp::datasets
