// Horizontal-flip test-time augmentation (`host predict --tta hflip`): how one output of the
// plain pass and the same output of the pass over mirrored images are combined.
#pragma once

#include <ATen/core/Tensor.h>

namespace tp {

/// The hflip TTA value of one model output, given `plain` (from the images) and `mirrored` (from
/// the images mirrored left-right), both with the batch as dim 0:
/// - a floating [B, C, H, W] map (per-pixel scores of a segmentation model): the mean of `plain`
///   and `mirrored` flipped back along W, since the mirrored pass's column x describes the image's
///   column W - 1 - x (the flip-back torchvision-style and MMSegmentation TTA do);
/// - another floating output (class scores [B, C], features): the mean of the two, which are
///   already aligned sample by sample;
/// - anything else (integer ids, masks): `plain`, unchanged.
/// Requires equal shapes for the floating cases (a tp::Error naming both otherwise). Spatial
/// outputs of another kind (box coordinates) are not mirrored back: predict those without TTA.
at::Tensor hflip_tta_mean(const at::Tensor& plain, const at::Tensor& mirrored);

}  // namespace tp
