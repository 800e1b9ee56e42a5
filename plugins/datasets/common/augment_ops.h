// The 14 image operations of torchvision's RandAugment / TrivialAugmentWide on 8-bit BGR OpenCV
// images, each matching torchvision.transforms.v2.functional on a uint8 RGB tensor (the oracle
// test tests/plugins/datasets/augment_oracle compares them pixel for pixel; tolerances are in
// docs/datasets.md). Every op is a pure function of (image, magnitude): no state, no randomness,
// so any worker reproduces it.
#pragma once

#include <opencv2/core.hpp>

namespace tp::datasets {

/// The ops in torchvision's _AUGMENTATION_SPACE order (RandAugment and TrivialAugmentWide share
/// it), so a uniform draw of an index picks the same op torchvision's would.
enum class AugOp : int {
  kIdentity, kShearX, kShearY, kTranslateX, kTranslateY, kRotate, kBrightness,
  kColor, kContrast, kSharpness, kPosterize, kSolarize, kAutoContrast, kEqualize,
};
inline constexpr int kAugOpCount = 14;

/// torchvision's name of `op` ("ShearX", ...); a static string.
const char* aug_op_name(AugOp op);

/// `op` applied to `bgr` (CV_8UC3, any size, may be a non-continuous view) with the signed
/// `magnitude` torchvision's `_apply_image_or_video_transform` receives: the shear factor
/// (ShearX/Y, the affine shear angle is atan of it, centre at the top-left pixel corner), pixels
/// (TranslateX/Y, truncated to an int), degrees counter-clockwise (Rotate, about the image
/// centre), factor - 1 (Brightness, Color, Contrast, Sharpness), bits (Posterize), threshold /
/// 255 (Solarize); ignored by Identity, AutoContrast and Equalize. Geometric ops sample with
/// nearest neighbour and fill uncovered pixels with 0. Returns a new continuous image (the
/// input is never modified). Cost: one pass over the pixels (Sharpness: a 3x3 box; Equalize,
/// AutoContrast, Contrast: one extra pass for statistics).
cv::Mat apply_aug_op(const cv::Mat& bgr, AugOp op, double magnitude);

/// The affine ops alone (ShearX/Y, TranslateX/Y, Rotate), as apply_aug_op. Kept apart so the
/// colour ops' file does not carry the grid arithmetic.
cv::Mat apply_geometric_op(const cv::Mat& bgr, AugOp op, double magnitude);

}  // namespace tp::datasets
