// Horizontal-flip test-time augmentation (`host predict --tta hflip`): how a batch is mirrored, and
// how one output of the plain pass and the same output of the pass over mirrored images are
// combined. In a padded batch (images of different sizes, plugin ABI 1.6) each image is mirrored
// within its own width, its padding staying on the right, as if its mirrored file had been read.
#pragma once

#include <ATen/core/Tensor.h>

#include "tp/framework/data/batch_layout.h"

namespace tp {

/// `t` ([B, ..., W]) with each row's last axis reversed: over its first `widths[b]` columns, the
/// rest (the padding) staying in place, where `widths` ([B] int64 on the CPU) is defined; whole
/// otherwise.
at::Tensor mirror_rows(const at::Tensor& t, const at::Tensor& widths);

/// `batch` mirrored left-right: every floating field of at least [B, H, W], within each sample's
/// own width where `layout` pads it (mirror_rows over own_sizes' widths, pixel_maps.h).
NamedTensors mirrored_batch(const NamedTensors& batch, const BatchLayout& layout);

/// The hflip TTA value of one model output, given `plain` (from the images) and `mirrored` (from
/// the images mirrored left-right), both with the batch as dim 0:
/// - a floating [B, C, H, W] map (per-pixel scores of a segmentation model): the mean of `plain`
///   and `mirrored` flipped back along W (within each sample's `widths`, as mirror_rows), since
///   the mirrored pass's column x describes the image's column w - 1 - x (the flip-back
///   torchvision-style and MMSegmentation TTA do);
/// - another floating output (class scores [B, C], features): the mean of the two, which are
///   already aligned sample by sample;
/// - anything else (integer ids, masks): `plain`, unchanged.
/// Requires equal shapes for the floating cases (a tp::Error naming both otherwise). Spatial
/// outputs of another kind (box coordinates) are not mirrored back: predict those without TTA.
at::Tensor hflip_tta_mean(const at::Tensor& plain, const at::Tensor& mirrored, const at::Tensor& widths = {});

}  // namespace tp
