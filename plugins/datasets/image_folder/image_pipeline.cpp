#include "image_pipeline.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

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

std::vector<unsigned char> read_file(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw Failure(TP_ERR_IO, "image_folder: cannot open '" + path + "': " + std::strerror(errno));
  // One allocation and one read of the whole file: the decoder needs it all in memory anyway.
  std::vector<unsigned char> bytes;
  if (std::fseek(f.get(), 0, SEEK_END) == 0) {
    const long size = std::ftell(f.get());
    if (size > 0) bytes.reserve(static_cast<std::size_t>(size));
    std::rewind(f.get());
  }
  unsigned char chunk[1 << 16];
  std::size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, f.get())) > 0) bytes.insert(bytes.end(), chunk, chunk + n);
  if (std::ferror(f.get())) throw Failure(TP_ERR_IO, "image_folder: cannot read '" + path + "'");
  return bytes;
}

cv::Mat decode(const std::vector<unsigned char>& bytes, int flags, const std::string& path) {
  cv::Mat img;
  try {
    img = cv::imdecode(cv::_InputArray(bytes.data(), static_cast<int>(bytes.size())),
                       flags | cv::IMREAD_IGNORE_ORIENTATION);
  } catch (const cv::Exception& e) {
    throw Failure(TP_ERR_IO, "image_folder: cannot decode '" + path + "': " + e.what());
  }
  if (img.empty() || img.type() != CV_8UC3)
    throw Failure(TP_ERR_IO, "image_folder: cannot decode '" + path +
                                 "' (not a readable JPEG, PNG, BMP or WebP image); fix or remove the file");
  return img;
}

/// torchvision.transforms.RandomResizedCrop.get_params, draw for draw.
Plan random_resized_crop(int height, int width, const TransformOptions& o, Rng& rng) {
  Plan p;
  p.out = o.random_resized_crop;
  const double area = static_cast<double>(height) * width;
  const double log_lo = std::log(o.ratio[0]), log_hi = std::log(o.ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(o.scale[0], o.scale[1]);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const int w = static_cast<int>(std::lround(std::sqrt(target * aspect)));
    const int h = static_cast<int>(std::lround(std::sqrt(target / aspect)));
    if (0 < w && w <= width && 0 < h && h <= height) {
      p.y = rng.below(height - h + 1);
      p.x = rng.below(width - w + 1);
      p.w = w;
      p.h = h;
      return p;
    }
  }
  // Fallback: the central crop at the nearest allowed aspect ratio.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < std::min(o.ratio[0], o.ratio[1])) {
    h = static_cast<int>(std::lround(w / std::min(o.ratio[0], o.ratio[1])));
  } else if (in_ratio > std::max(o.ratio[0], o.ratio[1])) {
    w = static_cast<int>(std::lround(h * std::max(o.ratio[0], o.ratio[1])));
  }
  p.y = (height - h) / 2;
  p.x = (width - w) / 2;
  p.w = w;
  p.h = h;
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
      throw Failure(TP_ERR_CONFIG, "image_folder: center_crop " + std::to_string(o.center_crop.h) + "x" +
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

/// Writes `src` (8-bit BGR, out.h x out.w) into `dst` as normalised float RGB, mirrored when `flip`.
/// Without jitter each value is one table lookup (256 entries per channel).
void write_plain(const cv::Mat& src, bool flip, const TransformOptions& o, float* dst) {
  float lut[3][256];
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) lut[c][v] = (static_cast<float>(v) / 255.0f - o.mean[c]) / o.std[c];
  const int h = src.rows, w = src.cols;
  const std::size_t plane = static_cast<std::size_t>(h) * w;
  for (int y = 0; y < h; ++y) {
    const unsigned char* row = src.ptr<unsigned char>(y);
    for (int x = 0; x < w; ++x) {
      const unsigned char* px = row + 3 * (flip ? w - 1 - x : x);
      const std::size_t at = static_cast<std::size_t>(y) * w + x;
      // BGR in, RGB out.
      if (o.channels_last) {
        dst[3 * at + 0] = lut[0][px[2]];
        dst[3 * at + 1] = lut[1][px[1]];
        dst[3 * at + 2] = lut[2][px[0]];
      } else {
        dst[at] = lut[0][px[2]];
        dst[plane + at] = lut[1][px[1]];
        dst[2 * plane + at] = lut[2][px[0]];
      }
    }
  }
}

float clamp01(float v) { return v < 0.f ? 0.f : (v > 1.f ? 1.f : v); }
float grey(const float* rgb) { return 0.2989f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2]; }

/// Colour jitter in float on [0, 1] RGB, in the fixed order brightness, contrast, saturation,
/// each clamped to [0, 1] (torchvision's adjust_* on float tensors; torchvision also randomises
/// the order, which we do not). Costs one temporary 3 x h x w float buffer and two extra passes.
void write_jittered(const cv::Mat& src, bool flip, const TransformOptions& o, double b, double c, double s,
                    float* dst) {
  const int h = src.rows, w = src.cols;
  const std::size_t n = static_cast<std::size_t>(h) * w;
  std::vector<float> rgb(3 * n);
  double grey_sum = 0.0;
  for (int y = 0; y < h; ++y) {
    const unsigned char* row = src.ptr<unsigned char>(y);
    for (int x = 0; x < w; ++x) {
      const unsigned char* px = row + 3 * (flip ? w - 1 - x : x);
      float* out = &rgb[3 * (static_cast<std::size_t>(y) * w + x)];
      for (int k = 0; k < 3; ++k) out[k] = clamp01(static_cast<float>(px[2 - k]) / 255.0f * static_cast<float>(b));
      grey_sum += grey(out);
    }
  }
  const float mean_grey = static_cast<float>(grey_sum / static_cast<double>(n));
  const auto cf = static_cast<float>(c), sf = static_cast<float>(s);
  for (std::size_t i = 0; i < n; ++i) {
    float* px = &rgb[3 * i];
    for (int k = 0; k < 3; ++k) px[k] = clamp01(cf * px[k] + (1.f - cf) * mean_grey);
    const float g = grey(px);
    for (int k = 0; k < 3; ++k) {
      const float v = (clamp01(sf * px[k] + (1.f - sf) * g) - o.mean[k]) / o.std[k];
      if (o.channels_last) dst[3 * i + k] = v;
      else dst[k * n + i] = v;
    }
  }
}

double jitter_factor(double amount, uint64_t seed, uint64_t tag) {
  if (amount <= 0.0) return 1.0;
  Rng rng(seed, tag);
  return rng.uniform(std::max(0.0, 1.0 - amount), 1.0 + amount);
}

}  // namespace

bool jpeg_size(const unsigned char* data, std::size_t size, int* out_h, int* out_w) {
  if (size < 4 || data[0] != 0xFF || data[1] != 0xD8) return false;
  std::size_t i = 2;
  while (i + 4 <= size) {
    if (data[i] != 0xFF) return false;
    const unsigned char marker = data[i + 1];
    if (marker == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    if (marker == 0xD8 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {
      i += 2;  // markers without a length
      continue;
    }
    const std::size_t length = (static_cast<std::size_t>(data[i + 2]) << 8) | data[i + 3];
    const bool sof = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (sof) {
      if (i + 9 > size) return false;
      *out_h = (data[i + 5] << 8) | data[i + 6];
      *out_w = (data[i + 7] << 8) | data[i + 8];
      return *out_h > 0 && *out_w > 0;
    }
    if (marker == 0xDA || length < 2) return false;  // scan data before any SOF: give up
    i += 2 + length;
  }
  return false;
}

Image load_image(const std::string& path, const TransformOptions& o, uint64_t seed) {
  const std::vector<unsigned char> bytes = read_file(path);
  // 1. The original size: from the JPEG header when possible (so the decode can be reduced),
  //    else by decoding at full size.
  cv::Mat full;
  int height = 0, width = 0;
  if (!jpeg_size(bytes.data(), bytes.size(), &height, &width)) {
    full = decode(bytes, cv::IMREAD_COLOR, path);
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
    full = decode(bytes, reduced_flag(r), path);
  }
  const double sx = static_cast<double>(full.cols) / width, sy = static_cast<double>(full.rows) / height;
  const int x0 = std::clamp(static_cast<int>(std::lround(plan.x * sx)), 0, full.cols - 1);
  const int y0 = std::clamp(static_cast<int>(std::lround(plan.y * sy)), 0, full.rows - 1);
  const int x1 = std::clamp(static_cast<int>(std::lround((plan.x + plan.w) * sx)), x0 + 1, full.cols);
  const int y1 = std::clamp(static_cast<int>(std::lround((plan.y + plan.h) * sy)), y0 + 1, full.rows);
  const cv::Mat roi = full(cv::Rect(x0, y0, x1 - x0, y1 - y0));
  // 4. One resize on 8-bit pixels (3 bytes per pixel instead of 12 for float): area averaging
  //    when shrinking (antialiased, like torchvision's antialias=True), bilinear otherwise.
  cv::Mat sized = roi;
  if (roi.cols != plan.out.w || roi.rows != plan.out.h) {
    const bool shrink = roi.cols >= plan.out.w && roi.rows >= plan.out.h;
    cv::resize(roi, sized, cv::Size(plan.out.w, plan.out.h), 0, 0, shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
  }
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
  if (jitter) {
    write_jittered(sized, flip, o, jitter_factor(o.brightness, seed, kTagBrightness),
                   jitter_factor(o.contrast, seed, kTagContrast), jitter_factor(o.saturation, seed, kTagSaturation),
                   out.pixels.data());
  } else {
    write_plain(sized, flip, o, out.pixels.data());
  }
  // 7. Random erasing on the normalised floats, as torchvision places it after Normalize.
  if (o.random) random_erase(out.pixels.data(), out.h, out.w, o.channels_last, o.erasing, seed);
  return out;
}

}  // namespace tp::image_folder
