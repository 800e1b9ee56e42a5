// org.torchhost.fcos_loss: FCOSHead.compute_loss and the component (fcos_loss.h).
#include "fcos_loss.h"

#include <ATen/core/Reduction.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/binary_cross_entropy_with_logits.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <c10/util/StringUtil.h>

#include <utility>

#include "box_ops.h"
#include "fcos_matcher.h"
#include "tp/cpp/guard.h"

namespace tp::detection {
namespace {

/// torchvision.ops.sigmoid_focal_loss(alpha=0.25, gamma=2, reduction="none").
at::Tensor sigmoid_focal_loss(const at::Tensor& inputs, const at::Tensor& targets) {
  const at::Tensor p = at::sigmoid(inputs);
  const at::Tensor ce_loss = at::binary_cross_entropy_with_logits(inputs, targets, {}, {}, at::Reduction::None);
  const at::Tensor p_t = p * targets + at::rsub(p, 1) * at::rsub(targets, 1);
  const at::Tensor loss = ce_loss * at::rsub(p_t, 1).pow(2);
  const at::Tensor alpha_t = targets * 0.25 + at::rsub(targets, 1) * 0.75;
  return alpha_t * loss;
}

bool is_integer(const at::Tensor& t) { return !t.is_floating_point() && !t.is_complex() && t.scalar_type() != at::kBool; }

}  // namespace

FcosLossParts fcos_head_loss(const at::Tensor& cls_logits, const at::Tensor& bbox_regression,
                             const at::Tensor& bbox_ctrness, const at::Tensor& anchors, const at::Tensor& boxes,
                             const at::Tensor& labels, const at::Tensor& matched) {
  const int64_t batch = matched.size(0), num_anchors = matched.size(1), num_classes = cls_logits.size(-1);
  const at::Tensor foreground = matched >= 0;
  // Each location's box and class; background locations read row 0 (any valid box: only the
  // foreground's values are summed) and class -1.
  at::Tensor gt_classes, gt_boxes;
  if (boxes.size(0) == 0) {
    gt_classes = at::full_like(matched, -1);
    gt_boxes = at::zeros({batch, num_anchors, 4}, boxes.options());
  } else {
    const at::Tensor rows = matched.clamp_min(0).flatten();
    gt_classes = at::where(foreground, labels.to(at::kLong).index_select(0, rows).view({batch, num_anchors}), -1);
    gt_boxes = boxes.index_select(0, rows).view({batch, num_anchors, 4});
  }

  FcosLossParts parts;
  parts.num_foreground = foreground.sum();
  // Classification: one-hot of the foreground's classes, focal loss over everything.
  const at::Tensor one_hot =
      (gt_classes.unsqueeze(-1) == at::arange(num_classes, matched.options())).to(cls_logits.scalar_type());
  parts.classification = sigmoid_focal_loss(cls_logits, one_hot).sum();
  // Regression: GIoU of the decoded boxes. torchvision selects the foreground with a boolean
  // mask (a device sync); zeroing the background is the same sum, rounded in another order.
  const at::Tensor pred_boxes = decode_boxes(bbox_regression, anchors);
  parts.bbox_regression = at::where(foreground, generalized_box_iou_loss(pred_boxes, gt_boxes), 0).sum();
  // Centre-ness: sqrt of (min / max) of the left-right and top-bottom distances. The background's
  // targets can be NaN (a point outside its row-0 box); zeroed first, so no NaN reaches backward.
  const at::Tensor reg_targets = encode_boxes(anchors, gt_boxes);
  const at::Tensor l = reg_targets.select(-1, 0), t = reg_targets.select(-1, 1);
  const at::Tensor r = reg_targets.select(-1, 2), b = reg_targets.select(-1, 3);
  const at::Tensor ctrness = at::sqrt((at::minimum(l, r) / at::maximum(l, r)) * (at::minimum(t, b) / at::maximum(t, b)));
  const at::Tensor ctrness_targets = at::where(foreground, ctrness, 0);
  const at::Tensor bce = at::binary_cross_entropy_with_logits(bbox_ctrness.squeeze(2), ctrness_targets, {}, {},
                                                              at::Reduction::None);
  parts.bbox_ctrness = at::where(foreground, bce, 0).sum();
  return parts;
}

FcosLoss::FcosLoss(const char* id, FcosLossConfig config)
    : id_(id),
      config_(std::move(config)),
      boxes_offsets_(config_.boxes + "_offsets"),
      labels_offsets_(config_.labels + "_offsets") {
  // The class count is the model's (its cls_logits' last dimension), known at forward only.
  description_.boxes_xyxy(config_.boxes).class_ids(config_.labels);
  // BCE against soft centre-ness targets in [0, 1]: its floor is their entropy (near 0.6 per
  // foreground location on detect_shapes), which no model goes below.
  description_.floored_term("bbox_ctrness");
  // The GIoU term falls slowly near zero: memorising detect_shapes' two batches, the other two
  // terms reach 25% of their start at step 60, 13% at step 150 and 5.1% only at step 300 (the
  // check's budget): twice the halfway value.
  description_.overfit_fraction(0.25);
}

void FcosLoss::misfit(const char* role, const std::string& name, const std::string& expected,
                      const at::Tensor& got) const {
  throw tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT, std::string(id_) + ": " + role + " '" + name + "': expected " +
                                                      expected + ", got " +
                                                      std::string(c10::toString(got.scalar_type())) + " " +
                                                      c10::str(got.sizes()));
}

tp::cpp::LossSum FcosLoss::forward(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) {
  const at::Tensor& cls_logits = outputs.get("cls_logits");
  if (cls_logits.dim() != 3 || cls_logits.size(0) < 1 || cls_logits.size(2) < 1 || !cls_logits.is_floating_point())
    misfit("output", "cls_logits", "floating [B, A, num_classes] logits (org.torchhost.fcos's)", cls_logits);
  const int64_t batch = cls_logits.size(0), num_anchors = cls_logits.size(1);
  const std::string ba = std::to_string(batch) + ", " + std::to_string(num_anchors);
  const auto floating = [&](const char* role, const std::string& name, const tp::cpp::Fields& fields,
                            std::vector<int64_t> shape, const std::string& what) -> const at::Tensor& {
    const at::Tensor& t = fields.get(name);
    if (!t.is_floating_point() || t.sizes() != at::IntArrayRef(shape)) misfit(role, name, what, t);
    return t;
  };
  const at::Tensor& bbox_regression =
      floating("output", "bbox_regression", outputs, {batch, num_anchors, 4}, "floating [" + ba + ", 4]");
  const at::Tensor& bbox_ctrness =
      floating("output", "bbox_ctrness", outputs, {batch, num_anchors, 1}, "floating [" + ba + ", 1]");
  const at::Tensor& anchors = floating("output", "anchors", outputs, {batch, num_anchors, 4}, "floating [" + ba + ", 4]");
  const at::Tensor& per_level = outputs.get("num_anchors_per_level");
  if (!is_integer(per_level) || per_level.dim() != 2 || per_level.size(0) != batch || per_level.size(1) < 1)
    misfit("output", "num_anchors_per_level", "an integer [" + std::to_string(batch) + ", levels] tensor", per_level);

  const at::Tensor& boxes = targets.get(config_.boxes);
  if (!boxes.is_floating_point() || boxes.dim() != 2 || boxes.size(1) != 4)
    misfit("target", config_.boxes, "floating [N, 4] boxes (x1, y1, x2, y2), ragged", boxes);
  const int64_t num_boxes = boxes.size(0);
  const at::Tensor& labels = targets.get(config_.labels);
  if (!is_integer(labels) || labels.dim() != 1 || labels.size(0) != num_boxes)
    misfit("target", config_.labels, "integer [" + std::to_string(num_boxes) + "] labels, one per box", labels);
  const std::string offsets_shape = "int64 [" + std::to_string(batch + 1) + "] offsets (the loader's ragged batching)";
  for (const std::string* name : {&boxes_offsets_, &labels_offsets_}) {
    const at::Tensor& offsets = targets.get(*name);
    if (offsets.scalar_type() != at::kLong || offsets.dim() != 1 || offsets.size(0) != batch + 1)
      misfit("target", *name, offsets_shape, offsets);
  }

  // A label outside [0, K) trains as background, silently (issue 41, item 10).
  if ((labels.is_cpu() || !labels_checked_) && labels.numel() > 0) {
    check_label_range(labels, cls_logits.size(2));
    labels_checked_ = true;
  }
  // Boxes as x, y, w, h (COCO's JSON form) are mostly degenerate as x1, y1, x2, y2, and trained
  // silently to a val/map near 0 (issue 43): read them where it costs no device sync, and once on
  // a device, as the labels.
  if ((boxes.is_cpu() || !boxes_checked_) && num_boxes > 0) {
    check_boxes(boxes, targets.get(boxes_offsets_));
    boxes_checked_ = true;
  }

  const at::Tensor matched = match_anchors(anchors[0], per_level[0].to(at::kLong), boxes, targets.get(boxes_offsets_),
                                           config_.center_sampling_radius);
  FcosLossParts parts = fcos_head_loss(cls_logits, bbox_regression, bbox_ctrness, anchors, boxes, labels, matched);
  at::Tensor sum = parts.classification + parts.bbox_regression + parts.bbox_ctrness;
  at::Tensor count = parts.num_foreground.clamp_min(1);
  last_ = {parts.classification.detach(), parts.bbox_regression.detach(), parts.bbox_ctrness.detach(),
           parts.num_foreground};
  return {std::move(sum), std::move(count)};
}

void FcosLoss::check_boxes(const at::Tensor& boxes, const at::Tensor& offsets) const {
  const at::Tensor bad = boxes.select(1, 2).le(boxes.select(1, 0)) | boxes.select(1, 3).le(boxes.select(1, 1)) |
                         boxes.isfinite().logical_not().any(1);
  const int64_t count = bad.sum().item<int64_t>();
  if (count == 0) return;
  const int64_t row = bad.nonzero().select(1, 0)[0].item<int64_t>();
  const at::Tensor o = offsets.cpu();
  const int64_t sample = at::searchsorted(o, at::scalar_tensor(row, at::kLong), /*out_int32=*/false, /*right=*/true)
                             .item<int64_t>() - 1;
  const at::Tensor box = boxes[row].to(at::kCPU, at::kDouble);
  const double* v = box.data_ptr<double>();
  const auto text = [](double x) { return c10::str(x); };
  throw tp::cpp::Failure(
      TP_ERR_INVALID_ARGUMENT,
      std::string(id_) + ": target '" + config_.boxes + "' holds " + std::to_string(count) + " of " +
          std::to_string(boxes.size(0)) + " boxes in this batch with x2 <= x1, y2 <= y1 or a non-finite corner (the "
          "first: sample " + std::to_string(sample) + " of the batch, box [" + text(v[0]) + ", " + text(v[1]) + ", " +
          text(v[2]) + ", " + text(v[3]) + "]). Boxes are x1, y1, x2, y2 in the image's pixels: did you give x, y, w, "
          "h (COCO's JSON form)? Convert them in the dataset, and drop boxes with no area (torchvision's detectors "
          "refuse them too).");
}

void FcosLoss::check_label_range(const at::Tensor& labels, int64_t num_classes) const {
  const auto [low, high] = at::aminmax(labels);
  const int64_t least = low.item<int64_t>(), most = high.item<int64_t>();
  if (least >= 0 && most < num_classes) return;
  const int64_t bad = least < 0 ? least : most;
  throw tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT,
                         std::string(id_) + ": target '" + config_.labels + "' holds the label " + std::to_string(bad) +
                             ", outside [0, " + std::to_string(num_classes) + ") of the model's " +
                             std::to_string(num_classes) + " classes (the last dimension of its cls_logits); it would "
                             "train as background. Give the model num_classes above every label (COCO category ids as "
                             "labels: num_classes = 91), or number the labels 0..K-1 (coco_detection: "
                             "contiguous_labels = true).");
}

std::vector<tp::cpp::LossTerm> FcosLoss::terms() const {
  return {{"classification", last_.classification},
          {"bbox_regression", last_.bbox_regression},
          {"bbox_ctrness", last_.bbox_ctrness}};
}

}  // namespace tp::detection
