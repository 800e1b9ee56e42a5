// The transforms of one segmentation sample, applied jointly to the image (bilinear, or area
// averaging when shrinking) and its mask (nearest neighbour, so class ids are never blended):
// size step (resize, RandomResize or RandomResizedCrop) -> horizontal flip -> pad to the crop size
// at the bottom and right (image 0, mask ignore_index) -> random crop -> colour jitter and
// normalisation (image only). The order and each op's parameters are those of torchvision's
// segmentation reference recipe (references/segmentation/presets.py with transforms.v2).
// Every random choice is drawn up front into a JointPlan from the host's per-sample seed (PLG-8),
// so the plan is a pure function of (source size, options, seed) and the oracle can replay it.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <opencv2/core.hpp>

#include "pixel_io.h"

namespace tp::segmentation_folder {

/// A height x width pair; 0 means "not set".
struct Size2 {
  int h = 0;
  int w = 0;
  bool set() const { return h > 0 && w > 0; }
};

/// The transforms of one split, fixed at create().
struct JointOptions {
  int resize_short = 0;                 ///< `resize = [s]`: shorter side to s, longer int(s * long / short)
  Size2 resize;                         ///< `resize = [h, w]`: exact size
  std::array<int, 2> random_resize{0, 0};  ///< train: shorter side uniform in [min, max) (v2.RandomResize)
  Size2 random_resized_crop;            ///< train: RandomResizedCrop output size
  std::array<double, 2> scale{0.08, 1.0};
  std::array<double, 2> ratio{3.0 / 4.0, 4.0 / 3.0};
  double hflip = 0.0;                   ///< train: probability of a joint horizontal mirror
  Size2 crop;                           ///< train: pad to at least this size, then a random crop of it
  double brightness = 0.0;              ///< train: colour jitter of the image only
  double contrast = 0.0;
  double saturation = 0.0;
  datasets::PixelFormat format;     ///< normalisation (channels_last unused: output is CHW)
  int ignore_index = 255;               ///< mask value of padded pixels
  bool random = false;                  ///< true for the train split: the random steps run
};

/// The decisions of one sample, in source pixels where they concern the source.
struct JointPlan {
  bool crop_first = false;       ///< RandomResizedCrop: `box` of the source is cut out first
  datasets::CropBox box;     ///< that box
  Size2 sized;                   ///< size after the size step (the source's when there is none)
  bool flip = false;
  Size2 crop;                    ///< unset: no crop; else the output size
  int pad_bottom = 0;            ///< rows added below the sized image before the crop
  int pad_right = 0;             ///< columns added to its right
  int crop_top = 0;              ///< crop offset in the padded image
  int crop_left = 0;
  bool jitter = false;
  datasets::JitterFactors factors;
};

/// The plan for a height x width source. The size step: random_resized_crop (train), else
/// random_resize (train), else resize. Draws only from `seed`, one stream per decision.
JointPlan plan_joint(int height, int width, const JointOptions& o, uint64_t seed);

/// The 8-bit result of the geometric steps.
struct JointImage {
  cv::Mat bgr;   ///< CV_8UC3, not yet mirrored when `flip_pending` (write_pixels mirrors it)
  cv::Mat mask;  ///< CV_8UC1 class ids, final
  bool flip_pending = false;
};

/// The geometric steps of `plan` on `bgr` (CV_8UC3) and `mask` (CV_8UC1, same size). The crop
/// is taken before mirroring (mirrored offsets; exact, and only the crop is copied), and the
/// image's mirror is left to the write pass.
JointImage apply_geometry(const cv::Mat& bgr, const cv::Mat& mask, const JointPlan& plan, int ignore_index);

/// `mask` resized to h x w as torch.nn.functional.interpolate(mode="nearest") does (what
/// torchvision uses for a tv_tensors.Mask): source index min(floor(dst * (float)in / out), in - 1)
/// in float32, exactly in / 2 ... when out == 2 in.
cv::Mat resize_nearest(const cv::Mat& mask, int h, int w);

/// The shorter side of a height x width image to `s` (torchvision's rule), as {h, w}.
Size2 shorter_side_to(int height, int width, int s);

/// The whole sample: plan, geometry, then the image's jitter and normalisation into CHW floats
/// (`pixels`, 3 h w) and the mask as int64 (`mask`, h w).
struct JointSample {
  std::vector<float> pixels;
  std::vector<int64_t> mask;
  int h = 0;
  int w = 0;
};
JointSample transform_pair(const cv::Mat& bgr, const cv::Mat& mask, const JointOptions& o, uint64_t seed);

}  // namespace tp::segmentation_folder
