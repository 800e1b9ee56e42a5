#include "pixel_io.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "tp/cpp/guard.h"

namespace tp::image_folder {
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

double jitter_factor(double amount, uint64_t seed, uint64_t tag) {
  if (amount <= 0.0) return 1.0;
  Rng rng(seed, tag);
  return rng.uniform(std::max(0.0, 1.0 - amount), 1.0 + amount);
}

/// "a FIFO", "a directory", ...: what a path that is not a regular file is, for a message.
const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

/// A JPEG (it starts with SOI, FF D8 FF) whose last scan (SOS, FF DA) has no EOI (FF D9) after
/// it: cut short. libjpeg decodes such a file with a warning and grey rows where PIL refuses it.
/// Inside a scan FF is always followed by 00 or a restart marker, so neither marker can occur in
/// the entropy-coded data; a progressive JPEG has several scans, and the EOI follows the last.
bool jpeg_truncated(const std::vector<unsigned char>& bytes) {
  if (bytes.size() < 3 || bytes[0] != 0xFF || bytes[1] != 0xD8 || bytes[2] != 0xFF) return false;
  for (std::size_t i = bytes.size() - 1; i > 0; --i) {
    if (bytes[i - 1] != 0xFF) continue;
    if (bytes[i] == 0xD9) return false; // an EOI after every scan seen from the end
    if (bytes[i] == 0xDA) return true;  // the last scan, and no EOI after it
  }
  return true; // no scan at all: not a decodable JPEG either way
}

uint32_t big_endian32(const unsigned char* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) | (static_cast<uint32_t>(p[2]) << 8) | p[3];
}
uint32_t little_endian(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int k = bytes - 1; k >= 0; --k) v = (v << 8) | p[k];
  return v;
}

/// PNG: the signature, then IHDR first, its width and height big-endian at bytes 16 and 20.
DeclaredSize png_size(const unsigned char* d, std::size_t size) {
  static const unsigned char kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (size < 24 || std::memcmp(d, kSignature, 8) != 0 || std::memcmp(d + 12, "IHDR", 4) != 0) return {};
  return {big_endian32(d + 16), big_endian32(d + 20)};
}

/// BMP: "BM", then the info header at byte 14: a 12-byte core header holds 16-bit sizes, a larger
/// one signed 32-bit sizes (a negative height is a top-down bitmap).
DeclaredSize bmp_size(const unsigned char* d, std::size_t size) {
  if (size < 26 || d[0] != 'B' || d[1] != 'M') return {};
  if (little_endian(d + 14, 4) == 12) return {little_endian(d + 18, 2), little_endian(d + 20, 2)};
  const auto width = static_cast<int32_t>(little_endian(d + 18, 4));
  const auto height = static_cast<int32_t>(little_endian(d + 22, 4));
  return {std::abs(static_cast<int64_t>(width)), std::abs(static_cast<int64_t>(height))};
}

/// WebP: "RIFF" <size> "WEBP", then the first chunk at byte 12: VP8X (extended: the canvas, 24-bit
/// width - 1 and height - 1 at 24 and 27), VP8L (lossless: 14-bit width - 1 and height - 1 after the
/// 0x2F signature byte at 20) or "VP8 " (lossy: the key frame's 14-bit sizes at 26 and 28).
DeclaredSize webp_size(const unsigned char* d, std::size_t size) {
  if (size < 30 || std::memcmp(d, "RIFF", 4) != 0 || std::memcmp(d + 8, "WEBP", 4) != 0) return {};
  if (std::memcmp(d + 12, "VP8X", 4) == 0) return {little_endian(d + 24, 3) + 1, little_endian(d + 27, 3) + 1};
  if (std::memcmp(d + 12, "VP8L", 4) == 0 && d[20] == 0x2F) {
    const uint32_t bits = little_endian(d + 21, 4);
    return {(bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1};
  }
  if (std::memcmp(d + 12, "VP8 ", 4) == 0 && d[23] == 0x9D && d[24] == 0x01 && d[25] == 0x2A)
    return {little_endian(d + 26, 2) & 0x3FFF, little_endian(d + 28, 2) & 0x3FFF};
  return {};
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

DeclaredSize declared_size(const unsigned char* data, std::size_t size) {
  int height = 0, width = 0;
  if (jpeg_size(data, size, &height, &width)) return {width, height};
  for (auto read : {&png_size, &bmp_size, &webp_size}) {
    const DeclaredSize declared = read(data, size);
    if (declared.width > 0 && declared.height > 0) return declared;
  }
  return {};
}

void refuse_oversized(int64_t width, int64_t height, int64_t max_pixels, const std::string& path, const char* component) {
  // width <= max / height, not width * height <= max: two 32-bit header fields overflow int64.
  if (max_pixels <= 0 || width <= 0 || height <= 0 || width <= max_pixels / height) return;
  const uint64_t pixels = static_cast<uint64_t>(width) * static_cast<uint64_t>(height);
  throw tp::cpp::Failure(TP_ERR_IO, std::string(component) + ": '" + path + "' declares " + std::to_string(width) +
                                        " x " + std::to_string(height) + " = " + std::to_string(pixels) +
                                        " pixels, more than max_image_pixels = " + std::to_string(max_pixels) +
                                        " (a decompression bomb, or an image far larger than training needs): it "
                                        "is not decoded. Shrink the file, or raise max_image_pixels (0: no limit) if "
                                        "the image is real");
}

std::string escapes_root(const std::string& name) {
  const std::filesystem::path path(name);
  if (path.is_absolute()) return "is absolute";
  int depth = 0;
  for (const auto& part : path.lexically_normal()) {
    if (part == "..") --depth;
    else if (part != "." && !part.empty()) ++depth;
    if (depth < 0) return "climbs out of it with '..'";
  }
  return "";
}

std::vector<unsigned char> read_image_file(const std::string& path, const char* component, int64_t max_pixels) {
  using tp::cpp::Failure;
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it before any read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Failure(TP_ERR_IO, std::string(component) + ": cannot open '" + path + "': " + std::strerror(errno));
  const std::unique_ptr<int, void (*)(int*)> closer(new int(fd), [](int* f) {
    ::close(*f);
    delete f;
  });
  struct stat info {};
  if (::fstat(fd, &info) != 0)
    throw Failure(TP_ERR_IO, std::string(component) + ": cannot read '" + path + "': " + std::strerror(errno));
  // A FIFO would hang the loader, /dev/zero fill memory, a directory read as nothing: only regular
  // files hold images.
  if (!S_ISREG(info.st_mode))
    throw Failure(TP_ERR_IO, std::string(component) + ": '" + path + "' is " + file_kind(info.st_mode) +
                                 ", not a regular file; samples are read from regular files only. Fix the listing "
                                 "or replace it with the image file");
  std::vector<unsigned char> bytes(static_cast<std::size_t>(info.st_size));
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + filled, bytes.size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Failure(TP_ERR_IO, std::string(component) + ": cannot read '" + path + "': " + std::strerror(errno));
    if (n == 0) break; // shrunk while being read: what is there is decoded (and refused if cut)
    filled += static_cast<std::size_t>(n);
  }
  bytes.resize(filled);
  check_image_bytes(bytes, path, component, max_pixels);
  return bytes;
}

void check_image_bytes(const std::vector<unsigned char>& bytes, const std::string& name, const char* component,
                       int64_t max_pixels) {
  if (jpeg_truncated(bytes))
    throw tp::cpp::Failure(TP_ERR_IO, std::string(component) + ": '" + name +
                                          "' is a truncated JPEG (no end-of-image marker after its last scan: the "
                                          "file was cut, as an interrupted copy or download leaves it); fix or remove "
                                          "the file");
  const DeclaredSize declared = declared_size(bytes.data(), bytes.size());
  refuse_oversized(declared.width, declared.height, max_pixels, name, component);
}

cv::Mat decode_bgr(const std::vector<unsigned char>& bytes, int flags, const std::string& path, const char* component) {
  using tp::cpp::Failure;
  cv::Mat img;
  try {
    img = cv::imdecode(cv::_InputArray(bytes.data(), static_cast<int>(bytes.size())),
                       flags | cv::IMREAD_IGNORE_ORIENTATION);
  } catch (const cv::Exception& e) {
    throw Failure(TP_ERR_IO, std::string(component) + ": cannot decode '" + path + "': " + e.what());
  }
  if (img.empty() || img.type() != CV_8UC3)
    throw Failure(TP_ERR_IO, std::string(component) + ": cannot decode '" + path +
                                 "' (not a readable JPEG, PNG, BMP or WebP image); fix or remove the file");
  return img;
}

cv::Mat resize_bgr(const cv::Mat& src, int h, int w) {
  if (src.cols == w && src.rows == h) return src;
  const bool shrink = src.cols >= w && src.rows >= h;
  cv::Mat out;
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
    const int w = static_cast<int>(std::lround(std::sqrt(target * aspect)));
    const int h = static_cast<int>(std::lround(std::sqrt(target / aspect)));
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
    h = static_cast<int>(std::lround(w / std::min(ratio[0], ratio[1])));
  } else if (in_ratio > std::max(ratio[0], ratio[1])) {
    w = static_cast<int>(std::lround(h * std::max(ratio[0], ratio[1])));
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

}  // namespace tp::image_folder
