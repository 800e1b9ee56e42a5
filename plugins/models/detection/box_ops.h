// detection: the box arithmetic FCOS shares between its post-processing and its loss, each
// function following torchvision 0.29 op by op (models/detection/_utils.py BoxLinearCoder,
// ops/boxes.py clip_boxes_to_image, models/detection/transform.py resize_boxes,
// ops/giou_loss.py), so that equal inputs give equal bits. Boxes are (x1, y1, x2, y2) in pixels,
// in the last dimension.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace tp::detection {

/// BoxLinearCoder(normalize_by_size=True).decode: the boxes `rel_codes` [..., 4] (distances from
/// the reference box's centre to the left, top, right and bottom edges, in units of its width or
/// height) describe around `reference` [..., 4], which is cast to rel_codes' dtype.
at::Tensor decode_boxes(const at::Tensor& rel_codes, const at::Tensor& reference);

/// BoxLinearCoder(normalize_by_size=True).encode: the inverse of decode_boxes, `boxes` [..., 4]
/// as distances from `reference`'s centres, in units of its sizes.
at::Tensor encode_boxes(const at::Tensor& reference, const at::Tensor& boxes);

/// clip_boxes_to_image: x clamped to [0, width], y to [0, height].
at::Tensor clip_boxes(const at::Tensor& boxes, int64_t height, int64_t width);

/// transform.resize_boxes: `boxes` [N, 4] of an image of size (height, width) scaled to one of
/// (new_height, new_width); the ratios are float32 quotients as torchvision computes them.
at::Tensor resize_boxes(const at::Tensor& boxes, double height, double width, double new_height, double new_width);

/// generalized_box_iou_loss(reduction="none", eps=1e-7): 1 - GIoU per pair of `boxes1` and
/// `boxes2` (both [..., 4], valid: x2 >= x1, y2 >= y1), shape [...]. Integer or half boxes are
/// computed in float32, as torchvision's _upcast_non_float does.
at::Tensor generalized_box_iou_loss(const at::Tensor& boxes1, const at::Tensor& boxes2);

}  // namespace tp::detection
