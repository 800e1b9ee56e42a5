// detection: torchvision's AnchorGenerator as FCOS configures it (models/detection/anchor_utils.py
// with sizes (8, 16, 32, 64, 128) and the one aspect ratio 1.0): one square anchor per location of
// each pyramid level, centred on the location's top-left pixel. FCOS reads only each anchor's
// centre (the "point") and side (the level's scale).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace tp::detection {

/// torchvision FCOS's anchor sizes, one per level P3 .. P7.
inline constexpr int64_t kAnchorSizes[] = {8, 16, 32, 64, 128};

/// The anchors of a batch padded to `image_height` x `image_width` whose levels have the spatial
/// sizes of `levels` ([B, C, H_l, W_l], P3 first): [sum H_l W_l, 4] (x1, y1, x2, y2), level by
/// level, row-major within a level, in the levels' dtype and device. Level l's stride is
/// image_height // H_l by image_width // W_l (torchvision's integer division, so P6 and P7 of an
/// image whose side is no multiple of 128 have strides other than 64 and 128) and its anchor
/// round(size / 2) either side of the stride-multiple shift. At most 5 levels.
at::Tensor fcos_anchors(const std::vector<at::Tensor>& levels, int64_t image_height, int64_t image_width);

}  // namespace tp::detection
