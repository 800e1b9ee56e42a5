// detection: box arithmetic, torchvision's operations in torchvision's order (box_ops.h).
#include "box_ops.h"

#include <ATen/TensorIndexing.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/max.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/min.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>

namespace tp::detection {
namespace {

/// Component `i` of the last dimension ("boxes[..., i]").
at::Tensor part(const at::Tensor& boxes, int64_t i) { return boxes.select(-1, i); }

/// _upcast_non_float: float32 and float64 stay, anything else becomes float32.
at::Tensor upcast(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble ? t : t.to(at::kFloat);
}

}  // namespace

at::Tensor decode_boxes(const at::Tensor& rel_codes, const at::Tensor& reference) {
  const at::Tensor boxes = reference.to(rel_codes.scalar_type());
  const at::Tensor ctr_x = (part(boxes, 0) + part(boxes, 2)) * 0.5;
  const at::Tensor ctr_y = (part(boxes, 1) + part(boxes, 3)) * 0.5;
  const at::Tensor w = part(boxes, 2) - part(boxes, 0);
  const at::Tensor h = part(boxes, 3) - part(boxes, 1);
  const at::Tensor codes = rel_codes * at::stack({w, h, w, h}, -1);
  return at::stack({ctr_x - part(codes, 0), ctr_y - part(codes, 1), ctr_x + part(codes, 2), ctr_y + part(codes, 3)}, -1);
}

at::Tensor encode_boxes(const at::Tensor& reference, const at::Tensor& boxes) {
  const at::Tensor ctr_x = (part(reference, 0) + part(reference, 2)) * 0.5;
  const at::Tensor ctr_y = (part(reference, 1) + part(reference, 3)) * 0.5;
  const at::Tensor targets = at::stack(
      {ctr_x - part(boxes, 0), ctr_y - part(boxes, 1), part(boxes, 2) - ctr_x, part(boxes, 3) - ctr_y}, -1);
  const at::Tensor w = part(reference, 2) - part(reference, 0);
  const at::Tensor h = part(reference, 3) - part(reference, 1);
  return targets / at::stack({w, h, w, h}, -1);
}

at::Tensor clip_boxes(const at::Tensor& boxes, int64_t height, int64_t width) {
  using at::indexing::Slice;
  const at::Tensor x = boxes.index({"...", Slice(0, at::indexing::None, 2)}).clamp(0, width);
  const at::Tensor y = boxes.index({"...", Slice(1, at::indexing::None, 2)}).clamp(0, height);
  return at::stack({x, y}, boxes.dim()).reshape(boxes.sizes());
}

at::Tensor resize_boxes(const at::Tensor& boxes, double height, double width, double new_height, double new_width) {
  const auto f32 = boxes.options().dtype(at::kFloat);
  const at::Tensor ratio_h = at::scalar_tensor(new_height, f32) / at::scalar_tensor(height, f32);
  const at::Tensor ratio_w = at::scalar_tensor(new_width, f32) / at::scalar_tensor(width, f32);
  return at::stack({part(boxes, 0) * ratio_w, part(boxes, 1) * ratio_h, part(boxes, 2) * ratio_w,
                    part(boxes, 3) * ratio_h},
                   1);
}

at::Tensor generalized_box_iou_loss(const at::Tensor& boxes1, const at::Tensor& boxes2) {
  constexpr double kEps = 1e-7;
  const at::Tensor a = upcast(boxes1), b = upcast(boxes2);
  const at::Tensor x1 = part(a, 0), y1 = part(a, 1), x2 = part(a, 2), y2 = part(a, 3);
  const at::Tensor x1g = part(b, 0), y1g = part(b, 1), x2g = part(b, 2), y2g = part(b, 3);
  // _loss_inter_union. torchvision assigns the intersection through a boolean mask; a where()
  // gives the same values and gradients without the device sync a mask index needs.
  const at::Tensor xkis1 = at::max(x1, x1g), ykis1 = at::max(y1, y1g);
  const at::Tensor xkis2 = at::min(x2, x2g), ykis2 = at::min(y2, y2g);
  const at::Tensor overlaps = (ykis2 > ykis1).logical_and(xkis2 > xkis1);
  const at::Tensor intsctk = at::where(overlaps, (xkis2 - xkis1) * (ykis2 - ykis1), at::zeros_like(x1));
  const at::Tensor unionk = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - intsctk;
  const at::Tensor iouk = intsctk / (unionk + kEps);
  // The smallest enclosing box.
  const at::Tensor xc1 = at::min(x1, x1g), yc1 = at::min(y1, y1g);
  const at::Tensor xc2 = at::max(x2, x2g), yc2 = at::max(y2, y2g);
  const at::Tensor area_c = (xc2 - xc1) * (yc2 - yc1);
  const at::Tensor miouk = iouk - ((area_c - unionk) / (area_c + kEps));
  return at::rsub(miouk, 1);
}

}  // namespace tp::detection
