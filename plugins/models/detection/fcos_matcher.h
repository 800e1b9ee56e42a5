// detection: FCOS's assignment of ground-truth boxes to locations, torchvision 0.29's
// FCOS.compute_loss up to matched_idxs, for a whole batch at once and without a device sync.
//
// torchvision loops over the images, comparing each image's N_i boxes with its A anchors. Here
// the anchors (the same for every image of a padded batch) meet all M = sum N_i boxes of the
// batch in one [A, M] comparison, and each anchor's best box per image is a segmented maximum
// (scatter_reduce over the image each box belongs to), with torchvision's tie-break (the first
// box of the image holding the maximum). Every value compared is computed by the same
// elementwise operations as torchvision's, so the assignment is the same.
#pragma once

#include <ATen/core/Tensor.h>

namespace tp::detection {

/// For every image b and anchor a: the row of `boxes` (of the whole batch) assigned to a in b,
/// or -1 (background); [B, A] int64 on the anchors' device. A box of image b is a candidate for
/// an anchor when the anchor's centre lies inside it, within `center_sampling_radius` anchor
/// sizes of its centre (per axis), and its largest centre-to-edge distance lies in the anchor's
/// level range (anchor size x 4 .. x 8; from 0 on the first level, without bound on the last);
/// among candidates the smallest box wins.
///
/// `anchors` [A, 4]; `num_anchors_per_level` int64 [L], summing to A; `boxes` [M, 4] (x1, y1,
/// x2, y2, x2 > x1, y2 > y1); `offsets` int64 [B + 1], image b owning rows offsets[b] ..
/// offsets[b + 1] - 1 (an image may own none). All on one device.
at::Tensor match_anchors(const at::Tensor& anchors, const at::Tensor& num_anchors_per_level, const at::Tensor& boxes,
                         const at::Tensor& offsets, double center_sampling_radius);

}  // namespace tp::detection
