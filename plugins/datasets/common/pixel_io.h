// The decode-side building blocks the image datasets share (tp_image_common: image_folder,
// segmentation_folder, coco_detection, webdataset): reading a file into memory with its checks
// (image_file.h, also linked alone by `host shards write`), decoding and resizing it,
// torchvision's RandomResizedCrop box, the colour-jitter draws, and the pass that turns 8-bit BGR
// pixels into normalised float RGB. Pure functions of their arguments.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "image_file.h"
#include "rng.h"

namespace tp::datasets {

/// `bytes` decoded by OpenCV with `flags` (an IMREAD_COLOR variant; EXIF orientation ignored, as
/// PIL and torchvision do) as 8-bit BGR. Throws tp::cpp::Failure(TP_ERR_IO) "<component>: cannot
/// decode '<path>' ..." when it is no image OpenCV decodes; "'<path>' is a PNG file that does not
/// decode (truncated or damaged...; re-download or re-export it ...)" when its signature names a
/// format OpenCV reads here (JPEG, PNG, BMP, WebP, TIFF, netpbm) and it still does not decode (a
/// PNG or BMP cut short is refused so before the decoder runs, which would print its own lines on
/// stderr: image_file.h truncation_of); and "... is a
/// truncated or corrupt JPEG" when a JPEG's image data ends early (decode_jpeg_crop's
/// data_missing: cv::imdecode would only print libjpeg's warning and fill the rest with grey). A
/// JPEG with IMREAD_COLOR or IMREAD_REDUCED_COLOR_2/4/8 is decoded by decode_jpeg_crop (the whole
/// image as the crop: OpenCV's pixels, bit for bit, at the same cost); what it leaves, by OpenCV.
cv::Mat decode_bgr(const std::vector<unsigned char>& bytes, int flags, const std::string& path, const char* component);

/// When a decoded file is `file_w` x `file_h` and what is paired with it (annotations, a mask)
/// says `other_w` x `other_h` with the two sides swapped: the sentence that names the likely cause,
/// a phone photo whose EXIF orientation (90 or 270 degrees) the labelling tool applied while the
/// host reads the stored pixels, as PIL and torchvision do, and the fix. "" otherwise.
std::string exif_swap_hint(int file_w, int file_h, int other_w, int other_h);

/// `src` (8-bit, any channels) resized to h x w with one cv::resize: area averaging when
/// shrinking in both directions (antialiased, like torchvision's antialias=True), bilinear when
/// enlarging; when one side shrinks and the other grows, two: area averaging along the shrinking
/// side to its size, then bilinear along the growing side (so the shrinking side is antialiased
/// too; an 8-bit image in between). `src` itself (no copy) when it already has that size.
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

}  // namespace tp::datasets
