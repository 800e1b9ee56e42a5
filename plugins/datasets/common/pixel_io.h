// The decode-side building blocks the image datasets share (tp_image_common: image_folder,
// segmentation_folder, coco_detection): reading a
// file into memory (and keeping a data file's names inside their directory), decoding and resizing it, torchvision's RandomResizedCrop box, the colour-jitter draws, and the pass that
// turns 8-bit BGR pixels into normalised float RGB. Pure functions of their arguments.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "rng.h"

namespace tp::image_folder {

/// PIL's decompression-bomb limit (Image.MAX_IMAGE_PIXELS x 2, where PIL raises
/// DecompressionBombError): the default of the datasets' `max_image_pixels` key.
inline constexpr int64_t kDefaultMaxImagePixels = 178'956'970;
/// The same number as the schema's TOML default text.
inline constexpr const char* kDefaultMaxImagePixelsText = "178956970";
/// The largest `max_image_pixels` the datasets accept (a bound for get_int_in).
inline constexpr int64_t kMaxImagePixelsBound = int64_t{1} << 62;

/// The schema text of `max_image_pixels`, the same in every dataset that reads images.
inline constexpr const char* kMaxImagePixelsHelp =
    "an image (or mask) whose header declares more pixels than this fails its sample before it is decoded "
    "(data.on_bad_sample): PIL's decompression-bomb limit; 0: no limit of ours (OpenCV still stops at 2^30)";

/// The bytes of the image file at `path`, read whole (decoders need it all in memory). Throws
/// tp::cpp::Failure(TP_ERR_IO) naming `component` and `path` when it cannot be read, is not a
/// regular file, is a truncated JPEG, or its header declares more than `max_pixels` pixels
/// (width x height; 0: no limit), so that no decoder allocates for it.
std::vector<unsigned char> read_image_file(const std::string& path, const char* component, int64_t max_pixels);

/// The checks read_image_file makes on the bytes it read, for bytes that come from elsewhere (a
/// member of a tar shard): throws tp::cpp::Failure(TP_ERR_IO) naming `component` and `name` when
/// `bytes` are a truncated JPEG or their header declares more than `max_pixels` pixels (0: no
/// limit). Cost: a backwards scan that stops at a JPEG's final marker, and a header parse.
void check_image_bytes(const std::vector<unsigned char>& bytes, const std::string& name, const char* component,
                       int64_t max_pixels);

/// An image's size as its header declares it, read without decoding.
struct DeclaredSize {
  int64_t width = 0;
  int64_t height = 0;
};

/// The size a JPEG (its SOF marker), PNG (IHDR), BMP (its info header) or WebP (VP8, VP8L or VP8X)
/// header declares; {0, 0} for any other or a malformed header (the decoder then decides).
DeclaredSize declared_size(const unsigned char* data, std::size_t size);

/// Width and height from a JPEG's SOF marker without decoding; false when `data` is not a JPEG
/// or has no SOF before the end (then the caller decodes to learn the size).
bool jpeg_size(const unsigned char* data, std::size_t size, int* out_h, int* out_w);

/// Throws tp::cpp::Failure(TP_ERR_IO) naming `component`, `path` and the key `max_image_pixels`
/// when width x height is more than `max_pixels` (> 0); for a decoder that reads the size itself
/// (segmentation_folder's masks, through libpng).
void refuse_oversized(int64_t width, int64_t height, int64_t max_pixels, const std::string& path, const char* component);

/// Why the file name `name`, from a data file (a COCO `file_name`, a list's entry), would name a
/// file outside the directory it is taken relative to: "is absolute" or "climbs out of it with
/// '..'"; "" when it stays inside (lexically: a symlink inside is the user's own choice).
std::string escapes_root(const std::string& name);

/// `bytes` decoded by OpenCV with `flags` (an IMREAD_COLOR variant; EXIF orientation ignored, as
/// PIL and torchvision do) as 8-bit BGR. Throws tp::cpp::Failure(TP_ERR_IO) "<component>: cannot
/// decode '<path>' ..." when it is not a readable JPEG, PNG, BMP or WebP image.
cv::Mat decode_bgr(const std::vector<unsigned char>& bytes, int flags, const std::string& path, const char* component);

/// `src` (8-bit, any channels) resized to h x w with one cv::resize: area averaging when
/// shrinking in both directions (antialiased, like torchvision's antialias=True), bilinear
/// otherwise; `src` itself (no copy) when it already has that size.
cv::Mat resize_bgr(const cv::Mat& src, int h, int w);

/// A crop rectangle in whole source pixels.
struct CropBox {
  int x = 0;
  int y = 0;
  int w = 0;
  int h = 0;
};

/// torchvision.transforms.RandomResizedCrop.get_params on a height x width image, draw for draw
/// from `rng`: up to 10 attempts of area fraction uniform in `scale` and log-uniform aspect
/// (w / h) in `ratio`, then the central crop at the nearest allowed aspect.
CropBox random_resized_crop_box(int height, int width, const std::array<double, 2>& scale,
                                const std::array<double, 2>& ratio, Rng& rng);

/// How 8-bit pixels become the float output: (v / 255 - mean) / std per RGB channel, written CHW
/// or (channels_last) HWC.
struct PixelFormat {
  std::array<float, 3> mean{0.f, 0.f, 0.f};
  std::array<float, 3> std{1.f, 1.f, 1.f};
  bool channels_last = false;
};

/// Colour-jitter factors of one sample; 1 leaves a property unchanged.
struct JitterFactors {
  double brightness = 1.0;
  double contrast = 1.0;
  double saturation = 1.0;
};

/// The factors for jitter amounts (b, c, s) >= 0: each uniform in [max(0, 1 - x), 1 + x], drawn
/// from `seed` with tags kTagBrightness, kTagContrast, kTagSaturation; 1 where the amount is 0.
JitterFactors draw_jitter(double brightness, double contrast, double saturation, uint64_t seed);

/// Writes `bgr` (CV_8UC3, h x w) into `dst` (3 h w floats) as normalised float RGB in `format`,
/// mirrored left to right when `flip`. With `jitter` (non-null) brightness, contrast and
/// saturation are applied first in that fixed order on [0, 1] floats with clamping, as
/// torchvision's adjust_* on float tensors (torchvision also randomises the order; we do not).
/// Cost: one pass with a 256-entry table per channel; with jitter a temporary 3 h w float buffer
/// and two passes.
void write_pixels(const cv::Mat& bgr, bool flip, const PixelFormat& format, const JitterFactors* jitter,
                  float* dst);

}  // namespace tp::image_folder
