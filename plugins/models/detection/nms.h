// detection: non-maximum suppression. LibTorch has none (torchvision registers nms as its own
// operator, torchvision::nms), so this is torchvision 0.29's CPU kernel
// (csrc/ops/cpu/nms_kernel.cpp) and ops/boxes.py batched_nms, with the same orders, ties and
// comparisons: on equal inputs they keep the same indices in the same order.
//
// On a CUDA tensor the greedy loop runs on a CPU copy of the boxes and scores (a device sync;
// post-processing is evaluation-only) and the kept indices go back to the tensor's device.
// torchvision would run its CUDA kernel, which suppresses the same boxes up to IoU rounding.
#pragma once

#include <ATen/core/Tensor.h>

namespace tp::detection {

/// torchvision.ops.nms: indices (int64, on boxes' device) of the boxes kept, in decreasing order
/// of score. `boxes` [N, 4] (x1, y1, x2, y2), `scores` [N], the same floating dtype. Boxes are
/// visited in the order at::sort(scores, 0, descending) gives; each one not yet suppressed is
/// kept and suppresses every later one whose IoU with it is > `iou_threshold`. Throws c10::Error
/// for other shapes or mixed dtypes.
at::Tensor nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold);

/// torchvision.ops.batched_nms: nms within each category `idxs` [N] (integer), never across
/// categories; indices kept, in decreasing order of score. As torchvision chooses: above 4,000
/// box coordinates on the CPU (100,000 on a GPU) one nms per category ("vanilla"), else one nms
/// over boxes shifted apart by category ("coordinate trick"). Half and bfloat16 boxes are compared
/// in float32.
at::Tensor batched_nms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs, double iou_threshold);

}  // namespace tp::detection
