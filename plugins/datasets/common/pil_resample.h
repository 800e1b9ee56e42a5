// PIL's antialiased bicubic resize on 8-bit pixels (Pillow's src/libImaging/Resample.c, the
// resampler behind Image.resize(size, Image.BICUBIC) and so behind torchvision's
// Resize(interpolation=BICUBIC) on PIL images, timm's evaluation and training transforms):
// Keys' cubic with a = -0.5, its support widened by the shrink factor when shrinking (the
// antialiasing OpenCV's INTER_CUBIC lacks), weights normalised per output pixel and rounded to 22
// fractional bits, two passes (horizontal then vertical, or the other way in Pillow 13 when the
// height shrinks much more than the width), each rounding and clamping to 0..255. The same double and integer arithmetic in the same order, so the pixels are
// PIL's bit for bit (tests/plugins/datasets/resize_oracle). Computes only a window of the resized
// image, from only the source pixels that window reads: resize then center_crop is one pass over
// the surviving pixels, as the rest of image_pipeline.h does it.
#pragma once

#include <cstdint>
#include <vector>

#include <opencv2/core.hpp>

namespace tp::datasets {

/// One axis of the resize: the input pixels and fixed-point weights of output pixels
/// [first, first + count) of an axis of `in_size` pixels resized to `out_size` (Resample.c's
/// precompute_coeffs and normalize_coeffs_8bpc, for those output pixels only).
struct ResampleAxis {
  int count = 0;               ///< output pixels
  int ksize = 0;               ///< weights stored per output pixel (the most any uses)
  bool identity = false;       ///< in_size == out_size: each output pixel is its input pixel (PIL skips the pass)
  std::vector<int> start;      ///< per output pixel: its first input pixel, relative to lo()
  std::vector<int> taps;       ///< per output pixel: how many input pixels it reads
  std::vector<int32_t> weights;  ///< count * ksize weights, 22 fractional bits
  int first_in = 0;            ///< the first input pixel any output pixel reads
  int end_in = 0;              ///< one past the last
  int lo() const { return first_in; }
  int hi() const { return end_in; }
};

/// The axis for output pixels [first, first + count) of `in_size` -> `out_size` (all >= 1,
/// first + count <= out_size). Cost: count * ksize filter evaluations; ksize is 5 when enlarging
/// and about 4 * in_size / out_size + 1 when shrinking.
ResampleAxis bicubic_axis(int in_size, int out_size, int first, int count);

/// Pillow 13's pass order for an in_w x in_h image resized to out_w x out_h: vertical first when
/// the height loses more than twice as many pixels as the width (Resample.c, "to make the
/// horizontal pass faster"), else horizontal first. Pillow 12 and older always went horizontal
/// first; the two orders differ only by the 8-bit rounding between the passes.
bool pil_vertical_first(int in_w, int in_h, int out_w, int out_h);

/// The window x.count wide and y.count high of the resized image, from `src`: 8-bit, 3 channels,
/// holding exactly the input pixels the axes read (columns x.lo() .. x.hi() - 1 and rows y.lo() ..
/// y.hi() - 1 of the image being resized; a view into a larger image is fine). The first pass
/// (pil_vertical_first of the whole resize: `vertical_first`) writes an 8-bit image, as PIL's; an
/// identity axis skips its pass, as PIL does.
/// Cost: about 3 * (rows read * x.count * x.ksize + y.count * x.count * y.ksize) multiply-adds
/// horizontal first, about 3 * (y.count * columns read * y.ksize + y.count * x.count * x.ksize)
/// vertical first.
cv::Mat resample_bicubic(const cv::Mat& src, const ResampleAxis& x, const ResampleAxis& y, bool vertical_first);

}  // namespace tp::datasets
