#include "pixel_io.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "jpeg_crop.h"
#include "tp/cpp/guard.h"

namespace tp::datasets {
namespace {

float clamp01(float v) { return v < 0.f ? 0.f : (v > 1.f ? 1.f : v); }
float grey(const float* rgb) { return 0.2989f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2]; }

/// Without jitter each value is one table lookup (256 entries per channel).
void write_plain(const cv::Mat& src, bool flip, const PixelFormat& o, float* dst) {
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

void write_jittered(const cv::Mat& src, bool flip, const PixelFormat& o, const JitterFactors& j, float* dst) {
  const int h = src.rows, w = src.cols;
  const std::size_t n = static_cast<std::size_t>(h) * w;
  std::vector<float> rgb(3 * n);
  double grey_sum = 0.0;
  for (int y = 0; y < h; ++y) {
    const unsigned char* row = src.ptr<unsigned char>(y);
    for (int x = 0; x < w; ++x) {
      const unsigned char* px = row + 3 * (flip ? w - 1 - x : x);
      float* out = &rgb[3 * (static_cast<std::size_t>(y) * w + x)];
      for (int k = 0; k < 3; ++k)
        out[k] = clamp01(static_cast<float>(px[2 - k]) / 255.0f * static_cast<float>(j.brightness));
      grey_sum += grey(out);
    }
  }
  const float mean_grey = static_cast<float>(grey_sum / static_cast<double>(n));
  const auto cf = static_cast<float>(j.contrast), sf = static_cast<float>(j.saturation);
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

/// The DCT reduction (1, 2, 4, 8) of an IMREAD_COLOR / IMREAD_REDUCED_COLOR_<r> decode (with or
/// without IMREAD_IGNORE_ORIENTATION, which the decode always adds); 0 for any other flags.
int jpeg_reduction(int flags) {
  switch (flags & ~cv::IMREAD_IGNORE_ORIENTATION) {
    case cv::IMREAD_COLOR: return 1;
    case cv::IMREAD_REDUCED_COLOR_2: return 2;
    case cv::IMREAD_REDUCED_COLOR_4: return 4;
    case cv::IMREAD_REDUCED_COLOR_8: return 8;
    default: return 0;
  }
}

double jitter_factor(double amount, uint64_t seed, uint64_t tag) {
  if (amount <= 0.0) return 1.0;
  Rng rng(seed, tag);
  return rng.uniform(std::max(0.0, 1.0 - amount), 1.0 + amount);
}

/// The format `bytes` begin with (image_file.h image_format) when it is one every OpenCV build
/// here decodes (the formats of kImageExtensions), else nullptr: a GIF or an AVIF that does not
/// decode is no damaged file, only one OpenCV does not read.
const char* decodable_format(const std::vector<unsigned char>& bytes) {
  const char* format = image_format(bytes.data(), bytes.size());
  if (format == nullptr) return nullptr;
  for (const char* known : {"JPEG", "PNG", "BMP", "WebP", "TIFF", "netpbm"})
    if (std::strcmp(format, known) == 0) return format;
  return nullptr;
}

/// "<component>: '<path>' is a PNG file that does not decode (truncated or damaged: <why>;
/// re-download or re-export it)".
std::string damaged_message(const std::vector<unsigned char>& bytes, const std::string& path, const char* component,
                            const std::string& why) {
  const char* format = decodable_format(bytes);
  return std::string(component) + ": '" + path + "' is a" + (std::strcmp(format, "netpbm") == 0 ? " netpbm (PPM/PGM)" : std::string(" ") + format) +
         " file that does not decode (truncated or damaged" + (why.empty() ? "" : ": " + why) +
         "; re-download or re-export it, or remove it)";
}

}  // namespace

cv::Mat decode_bgr(const std::vector<unsigned char>& bytes, int flags, const std::string& path, const char* component) {
  using tp::cpp::Failure;
  if (bytes.empty())
    throw Failure(TP_ERR_IO, std::string(component) + ": '" + path + "' is empty (0 bytes), not an image; fix or "
                                 "remove the file");
  // A JPEG goes through libjpeg's API with OpenCV's settings (jpeg_crop.h: the same pixels, bit
  // for bit), because cv::imdecode only prints libjpeg's warnings: a scan that ends early decodes
  // to grey rows there, and would train without a word (issue 58).
  if (const int reduction = jpeg_reduction(flags); reduction > 0) {
    bool data_missing = false;
    cv::Mat img = decode_jpeg_crop(bytes, reduction, [](int cols, int rows) { return PixelRect{0, 0, cols, rows}; },
                                   &data_missing);
    if (!img.empty()) return img;
    if (data_missing)
      throw Failure(TP_ERR_IO, std::string(component) + ": '" + path +
                                   "' is a truncated or corrupt JPEG: its image data stops before the image is complete "
                                   "(libjpeg: premature end of data segment), and the decoder would fill the rest with "
                                   "grey (a file cut short, with an end-of-image marker after the cut); fix or remove "
                                   "the file");
    // Anything else it does not take (CMYK, arithmetic coding, a harmless warning): OpenCV's decode.
  }
  // A file cut short, refused before the decoder sees it: libpng and OpenCV's BMP reader would
  // print their own unattributed lines on stderr (image_file.h, truncation_of).
  if (const std::string cut = truncation_of(bytes.data(), bytes.size()); !cut.empty())
    throw Failure(TP_ERR_IO, damaged_message(bytes, path, component, cut));
  cv::Mat img;
  try {
    img = cv::imdecode(cv::_InputArray(bytes.data(), static_cast<int>(bytes.size())),
                       flags | cv::IMREAD_IGNORE_ORIENTATION);
  } catch (const cv::Exception& e) {
    // e.what() adds OpenCV's version, source file and line (and a newline) to the description.
    const std::string what = e.err.empty() ? e.what() : e.err;
    if (decodable_format(bytes) != nullptr)
      throw Failure(TP_ERR_IO, damaged_message(bytes, path, component, "OpenCV: " + what));
    throw Failure(TP_ERR_IO, std::string(component) + ": cannot decode '" + path + "' (OpenCV: " + what +
                                 "); fix or remove the file");
  }
  if (img.empty())
    if (const std::string note = apple_double_note(bytes, path); !note.empty())
      throw Failure(TP_ERR_IO, std::string(component) + ": cannot decode '" + path + "': " + note);
  // The file is one of the formats OpenCV reads here, by its signature, and still does not
  // decode: "not an image" sent users to check the format of a PNG that was cut short.
  if (img.empty() && decodable_format(bytes) != nullptr) throw Failure(TP_ERR_IO, damaged_message(bytes, path, component, ""));
  if (img.empty() || img.type() != CV_8UC3)
    throw Failure(TP_ERR_IO, std::string(component) + ": cannot decode '" + path +
                                 "' (not an image OpenCV's decoder reads: JPEG, PNG, BMP, WebP, TIFF and the other "
                                 "formats of docs/datasets.md); fix or remove the file");
  return img;
}

cv::Mat resize_bgr(const cv::Mat& src, int h, int w) {
  if (src.cols == w && src.rows == h) return src;
  const bool shrink = src.cols >= w && src.rows >= h;
  cv::Mat out;
  if (!shrink && (src.cols > w || src.rows > h)) {
    // One side shrinks, the other grows (resize = [32, 32] on a 600 x 24 text line): bilinear
    // alone samples the shrinking side without a low-pass filter, 24.5 grey levels from
    // torchvision's antialias=True on the trial's images (data trial F10). Area averaging along
    // that axis to its final size, then bilinear along the other. Only here: the other cases keep
    // their one cv::resize, bit for bit.
    cv::Mat narrowed;
    cv::resize(src, narrowed, cv::Size(std::min(src.cols, w), std::min(src.rows, h)), 0, 0, cv::INTER_AREA);
    cv::resize(narrowed, out, cv::Size(w, h), 0, 0, cv::INTER_LINEAR);
    return out;
  }
  cv::resize(src, out, cv::Size(w, h), 0, 0, shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
  return out;
}

CropBox random_resized_crop_box(int height, int width, const std::array<double, 2>& scale,
                                const std::array<double, 2>& ratio, Rng& rng) {
  const double area = static_cast<double>(height) * width;
  const double log_lo = std::log(ratio[0]), log_hi = std::log(ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(scale[0], scale[1]);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const int w = static_cast<int>(std::nearbyint(std::sqrt(target * aspect)));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(target / aspect)));
    if (0 < w && w <= width && 0 < h && h <= height) {
      CropBox box;
      box.y = rng.below(height - h + 1);
      box.x = rng.below(width - w + 1);
      box.w = w;
      box.h = h;
      return box;
    }
  }
  // Fallback: the central crop at the nearest allowed aspect ratio.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < std::min(ratio[0], ratio[1])) {
    h = static_cast<int>(std::nearbyint(w / std::min(ratio[0], ratio[1])));
  } else if (in_ratio > std::max(ratio[0], ratio[1])) {
    w = static_cast<int>(std::nearbyint(h * std::max(ratio[0], ratio[1])));
  }
  return CropBox{(width - w) / 2, (height - h) / 2, w, h};
}

JitterFactors draw_jitter(double brightness, double contrast, double saturation, uint64_t seed) {
  return {jitter_factor(brightness, seed, kTagBrightness), jitter_factor(contrast, seed, kTagContrast),
          jitter_factor(saturation, seed, kTagSaturation)};
}

void write_pixels(const cv::Mat& bgr, bool flip, const PixelFormat& format, const JitterFactors* jitter,
                  float* dst) {
  if (jitter != nullptr) write_jittered(bgr, flip, format, *jitter, dst);
  else write_plain(bgr, flip, format, dst);
}

std::string exif_swap_hint(int file_w, int file_h, int other_w, int other_h) {
  if (file_w == file_h || file_w != other_h || file_h != other_w) return "";
  return ". The sides are swapped: the file is probably a photo with an EXIF orientation of 90 or 270 degrees, "
         "which the labelling tool applied (CVAT, Label Studio and Roboflow export the displayed orientation) "
         "while the host reads the stored pixels, as PIL and torchvision do; save the image upright "
         "(PIL: ImageOps.exif_transpose(Image.open(f)).save(f)) so that file and annotations agree";
}

}  // namespace tp::datasets
