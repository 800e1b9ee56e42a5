// detection: torchvision's nms CPU kernel and batched_nms (nms.h).
#include "nms.h"

#include <ATen/Dispatch.h>
#include <ATen/ops/_unique2.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include <algorithm>
#include <cstdint>
#include <tuple>

namespace tp::detection {
namespace {

/// nms_kernel_impl of torchvision, on CPU tensors of scalar_t.
template <typename scalar_t>
at::Tensor nms_cpu(const at::Tensor& dets, const at::Tensor& scores, double iou_threshold) {
  if (dets.numel() == 0) return at::empty({0}, dets.options().dtype(at::kLong));
  const at::Tensor x1_t = dets.select(1, 0).contiguous();
  const at::Tensor y1_t = dets.select(1, 1).contiguous();
  const at::Tensor x2_t = dets.select(1, 2).contiguous();
  const at::Tensor y2_t = dets.select(1, 3).contiguous();
  const at::Tensor areas_t = (x2_t - x1_t) * (y2_t - y1_t);
  const at::Tensor order_t = std::get<1>(scores.sort(0, /*descending=*/true));

  const int64_t ndets = dets.size(0);
  at::Tensor suppressed_t = at::zeros({ndets}, dets.options().dtype(at::kByte));
  at::Tensor keep_t = at::zeros({ndets}, dets.options().dtype(at::kLong));
  uint8_t* suppressed = suppressed_t.data_ptr<uint8_t>();
  int64_t* keep = keep_t.data_ptr<int64_t>();
  const int64_t* order = order_t.data_ptr<int64_t>();
  const scalar_t* x1 = x1_t.data_ptr<scalar_t>();
  const scalar_t* y1 = y1_t.data_ptr<scalar_t>();
  const scalar_t* x2 = x2_t.data_ptr<scalar_t>();
  const scalar_t* y2 = y2_t.data_ptr<scalar_t>();
  const scalar_t* areas = areas_t.data_ptr<scalar_t>();

  int64_t num_to_keep = 0;
  for (int64_t oi = 0; oi < ndets; ++oi) {
    const int64_t i = order[oi];
    if (suppressed[i] == 1) continue;
    keep[num_to_keep++] = i;
    for (int64_t oj = oi + 1; oj < ndets; ++oj) {
      const int64_t j = order[oj];
      if (suppressed[j] == 1) continue;
      // In scalar_t throughout, as the kernel: the IoU is rounded as torchvision rounds it.
      const scalar_t w = std::max(static_cast<scalar_t>(0), std::min(x2[i], x2[j]) - std::max(x1[i], x1[j]));
      const scalar_t h = std::max(static_cast<scalar_t>(0), std::min(y2[i], y2[j]) - std::max(y1[i], y1[j]));
      const scalar_t inter = w * h;
      const scalar_t ovr = inter / (areas[i] + areas[j] - inter);
      if (ovr > iou_threshold) suppressed[j] = 1;
    }
  }
  return keep_t.narrow(0, 0, num_to_keep);
}

/// nms on a CPU copy; the indices back on `device`.
at::Tensor nms_on_cpu(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  TORCH_CHECK(boxes.dim() == 2 && boxes.size(1) == 4, "nms: boxes must be [N, 4], got ", boxes.sizes());
  TORCH_CHECK(scores.dim() == 1 && scores.size(0) == boxes.size(0), "nms: scores must be [", boxes.size(0), "], got ",
              scores.sizes());
  TORCH_CHECK(boxes.scalar_type() == scores.scalar_type(), "nms: boxes and scores must have the same dtype");
  const at::Tensor dets = boxes.is_cpu() ? boxes : boxes.cpu();
  const at::Tensor s = scores.is_cpu() ? scores : scores.cpu();
  at::Tensor keep;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dets.scalar_type(), "nms",
                                  [&] { keep = nms_cpu<scalar_t>(dets, s, iou_threshold); });
  return keep.to(boxes.device());
}

at::Tensor batched_nms_coordinate_trick(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                                        double iou_threshold) {
  if (boxes.numel() == 0) return at::empty({0}, boxes.options().dtype(at::kLong));
  const at::Tensor max_coordinate = boxes.max();
  const at::Tensor offsets = idxs.to(boxes.options()) * (max_coordinate + at::scalar_tensor(1, boxes.options()));
  return nms_on_cpu(boxes + offsets.unsqueeze(1), scores, iou_threshold);
}

at::Tensor batched_nms_vanilla(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                               double iou_threshold) {
  at::Tensor keep_mask = at::zeros_like(scores, scores.options().dtype(at::kBool));
  const at::Tensor classes = std::get<0>(at::_unique2(idxs)).cpu();
  for (int64_t c = 0; c < classes.numel(); ++c) {
    const at::Tensor current = at::where(idxs == classes[c].item())[0];
    const at::Tensor kept = nms_on_cpu(boxes.index_select(0, current), scores.index_select(0, current), iou_threshold);
    keep_mask.index_fill_(0, current.index_select(0, kept), true);
  }
  const at::Tensor keep_indices = at::where(keep_mask)[0];
  return keep_indices.index_select(0, std::get<1>(scores.index_select(0, keep_indices).sort(-1, /*descending=*/true)));
}

}  // namespace

at::Tensor nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  return nms_on_cpu(boxes, scores, iou_threshold);
}

at::Tensor batched_nms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs, double iou_threshold) {
  // Half precision cannot hold the trick's shifted coordinates (91 classes x 1,334 px > 65,504)
  // nor large areas: such boxes are compared in float32 (torchvision's CPU kernel refuses them).
  if (boxes.scalar_type() == at::kHalf || boxes.scalar_type() == at::kBFloat16)
    return batched_nms(boxes.to(at::kFloat), scores.to(at::kFloat), idxs, iou_threshold);
  const int64_t vanilla_above = boxes.is_cpu() ? 4000 : 100000;
  if (boxes.numel() > vanilla_above) return batched_nms_vanilla(boxes, scores, idxs, iou_threshold);
  return batched_nms_coordinate_trick(boxes, scores, idxs, iou_threshold);
}

}  // namespace tp::detection
