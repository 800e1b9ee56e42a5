// Decode + transform of one image_folder sample: file bytes -> the crop's 8-bit BGR pixels (a
// JPEG's crop alone, with libjpeg-turbo: jpeg_crop.h; any other file whole with OpenCV, then cut)
// -> one resize on 8-bit pixels -> (with RandAugment / TrivialAugment: flip, then the ops on 8-bit
// pixels) -> a single pass that flips, colour-jitters, normalises and writes float32 RGB straight
// into the output buffer -> random erasing on that buffer. Pure function of (file bytes, options, seed), so
// any worker thread produces the same values for the same sample. encoded_box gives the same
// geometry without decoding, for a host that decodes the file on the device (plugin ABI 1.11).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "augment_policy.h"
#include "pixel_io.h"
#include "random_erasing.h"

namespace tp::datasets {

/// A height x width pair; 0 means "not set".
struct Size2 {
  int h = 0;
  int w = 0;
  bool set() const { return h > 0 && w > 0; }
};

/// How the one resize of a sample interpolates (the `interpolation` key).
enum class Interpolation {
  kBilinear,  ///< "bilinear": area averaging when shrinking, bilinear when enlarging (resize_bgr, OpenCV)
  kBicubic,   ///< "bicubic": PIL's antialiased bicubic (pil_resample.h), torchvision's BICUBIC on PIL
              ///< images as timm uses it; the JPEG decoded at full size, whatever fast_decode says
};

/// The most views of each kind (views, local_views) a split makes of one image: the field names
/// are static strings (image_field.cpp), and 16 exceeds every published recipe (DINO: 2 + 10).
inline constexpr int kMaxViews = 16;

/// The transforms of one split, fixed at create().
struct TransformOptions {
  int resize_short = 0;       ///< `resize = [s]`: shorter side to s (longer = int(s * long / short))
  Size2 resize;               ///< `resize = [h, w]`: exact size
  Size2 center_crop;          ///< after resize; offsets Python's round((H - h) / 2), half to even, as torchvision
  Size2 random_resized_crop;  ///< train only; replaces resize and center_crop when set
  std::array<double, 2> scale{0.08, 1.0};             ///< random_resized_crop area fraction range
  std::array<double, 2> ratio{3.0 / 4.0, 4.0 / 3.0};  ///< random_resized_crop aspect range (w / h)
  Interpolation interpolation = Interpolation::kBilinear;  ///< the resize (resize + center_crop, random_resized_crop)
  double hflip = 0.0;         ///< train only: probability of a horizontal mirror
  double brightness = 0.0;    ///< train only: factor uniform in [max(0, 1 - b), 1 + b]
  double contrast = 0.0;      ///< train only: as brightness, blend with the mean grey level
  double saturation = 0.0;    ///< train only: as brightness, blend with the per-pixel grey
  AugmentOptions augment;     ///< train only: RandAugment / TrivialAugmentWide after the flip
  ErasingOptions erasing;     ///< train only: RandomErasing after normalisation
  std::array<float, 3> mean{0.f, 0.f, 0.f};  ///< RGB, applied after scaling pixels to [0, 1]
  std::array<float, 3> std{1.f, 1.f, 1.f};
  bool channels_last = false; ///< memory HWC (logical shape stays [3, H, W])
  bool fast_decode = true;    ///< JPEG: decode at 1/2, 1/4 or 1/8 scale when the crop allows (bilinear only)
  int64_t max_image_pixels = kDefaultMaxImagePixels;  ///< a larger declared size fails the sample; 0: no limit
  int views = 1;              ///< train only: views of each image (image_0 ..), 1 = the field "image"
  int local_views = 0;        ///< train only: small views (local_0 ..) cut to local_crop with local_scale
  Size2 local_crop;           ///< local_views' random resized crop output
  std::array<double, 2> local_scale{0.05, 0.4};  ///< local_views' crop area range
  bool random = false;        ///< true for the train split: the random transforms run
  const char* component = "image_folder";  ///< the dataset its messages name (static storage)
};

/// One decoded and transformed image.
struct Image {
  std::vector<float> pixels;  ///< 3 * h * w floats, CHW (or HWC when channels_last)
  int h = 0;
  int w = 0;
};

/// Decodes the image file's bytes `bytes` (EXIF orientation ignored, as PIL/torchvision do) and
/// applies the transforms of `o`, drawing every random choice from `seed` (the host's per-sample
/// seed). `name` says where the bytes came from in messages (a path, a shard member). The bytes
/// are checked first (check_image_bytes: a truncated JPEG, more than o.max_image_pixels), since
/// they may come from anywhere. Throws tp::cpp::Failure(TP_ERR_IO) naming o.component and `name`
/// when they are refused or do not decode, and Failure(TP_ERR_CONFIG) naming them when
/// center_crop is larger than the resized image. Pure function of (bytes, o, seed), so two
/// datasets that hold the same file give the same pixels.
/// Cost (measured, docs/datasets.md): dominated by the JPEG decode; the reduced-scale decode
/// makes a 500x375 JPEG to 224x224 about 2-3x cheaper than a full decode, and decoding only the
/// crop (decode_jpeg_crop) raised a loader thread's rate on ImageNet-like JPEGs 1.67x.
Image transform_image(const std::vector<unsigned char>& bytes, const std::string& name, const TransformOptions& o,
                      uint64_t seed);

/// The geometry transform_image applies to one image, in the stored image's pixels: the encoded
/// form's `<name>_box` (plugin ABI 1.11, tp_encoded_image_t), for a host that decodes the file
/// itself and must cut what the CPU path cuts.
struct ImageBox {
  int x0 = 0;  ///< the crop, x0 and y0 inclusive, x1 and y1 exclusive, at full resolution (what
  int y0 = 0;  ///< transform_image cuts with fast_decode off)
  int x1 = 0;
  int y1 = 0;
  bool flip = false;  ///< mirror left-right after the resize
  int height = 0;     ///< the stored size as the JPEG header declares it; 0 x 0 (and a zero crop)
  int width = 0;      ///< when the header does not give it: the host then asks for the pixels
  /// x0, y0, x1, y1, flip (0/1), height, width: the int32 [7] field `<name>_box`.
  std::array<int32_t, 7> values() const;
};

/// What the host needs to decode `bytes` itself and get transform_image's pixels (with fast_decode
/// off), drawn exactly as transform_image draws them: the same byte checks first (check_image_bytes:
/// a truncated JPEG, more than o.max_image_pixels fail the sample as on the CPU path, so
/// data.on_bad_sample applies alike), the size from the JPEG header (jpeg_size), then the same plan
/// (random_resized_crop or resize + center_crop, the flip) from (seed, that size) and the same
/// integer crop at full scale. For bytes whose size the header does not give (PNG, BMP, WebP, a
/// JPEG without SOF before its data) height = width = 0 and the crop is zero; the flip is still the
/// sample's. Throws as transform_image for refused bytes and for a center_crop larger than the
/// resized image. Cost: a header parse and a few draws; nothing is decoded.
ImageBox encoded_box(const std::vector<unsigned char>& bytes, const std::string& name, const TransformOptions& o,
                     uint64_t seed);

/// read_image_file(path) then transform_image: reads `path` whole and transforms it. Throws as
/// both, naming `path`; Failure(TP_ERR_IO) also when the file cannot be read or is not a regular
/// file. (The byte checks run twice, a few microseconds against a decode's milliseconds.)
Image load_image(const std::string& path, const TransformOptions& o, uint64_t seed);

}  // namespace tp::datasets
