// detection: FCOS.postprocess_detections and transform.postprocess (postprocess.h).
#include "postprocess.h"

#include <ATen/TensorIndexing.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/div.h>
#include <ATen/ops/remainder.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>

#include <algorithm>

#include "box_ops.h"
#include "nms.h"

namespace tp::detection {
namespace {

/// One image's detections, best first.
struct ImageDetections {
  at::Tensor boxes, scores, labels;
};

/// postprocess_detections for image `index`.
ImageDetections detect_image(const FcosForward& f, int64_t index, const std::array<int64_t, 2>& size,
                             const PostprocessOptions& o) {
  const at::Tensor logits = f.head.cls_logits[index];
  const at::Tensor regression = f.head.bbox_regression[index];
  const at::Tensor ctrness = f.head.bbox_ctrness[index];
  const int64_t num_classes = logits.size(-1);
  std::vector<at::Tensor> boxes, scores, labels;
  int64_t start = 0;
  for (const int64_t count : f.num_anchors_per_level) {
    const at::Tensor level_logits = logits.narrow(0, start, count);
    const at::Tensor level_regression = regression.narrow(0, start, count);
    const at::Tensor level_ctrness = ctrness.narrow(0, start, count);
    const at::Tensor level_anchors = f.anchors.narrow(0, start, count);
    start += count;
    // Remove low scoring boxes, then keep the topk_candidates best.
    at::Tensor level_scores = at::sqrt(at::sigmoid(level_logits) * at::sigmoid(level_ctrness)).flatten();
    const at::Tensor keep = level_scores > o.score_thresh;
    level_scores = level_scores.index({keep});
    at::Tensor topk_idxs = at::where(keep)[0];
    const int64_t num_topk = std::min(o.topk_candidates, topk_idxs.size(0));
    auto [top_scores, idxs] = level_scores.topk(num_topk);
    topk_idxs = topk_idxs.index_select(0, idxs);
    const at::Tensor anchor_idxs = at::div(topk_idxs, num_classes, "floor");
    labels.push_back(at::remainder(topk_idxs, num_classes));
    scores.push_back(top_scores);
    const at::Tensor level_boxes = decode_boxes(level_regression.index_select(0, anchor_idxs),
                                                level_anchors.index_select(0, anchor_idxs));
    boxes.push_back(clip_boxes(level_boxes, size[0], size[1]));
  }
  ImageDetections d{at::cat(boxes, 0), at::cat(scores, 0), at::cat(labels, 0)};
  at::Tensor kept = batched_nms(d.boxes, d.scores, d.labels, o.nms_thresh);
  kept = kept.narrow(0, 0, std::min(o.detections_per_img, kept.size(0)));
  return {d.boxes.index_select(0, kept), d.scores.index_select(0, kept), d.labels.index_select(0, kept)};
}

}  // namespace

Detections postprocess_detections(const FcosForward& forward, const std::vector<std::array<int64_t, 2>>& image_sizes,
                                  const std::vector<std::array<double, 2>>& original_sizes,
                                  const PostprocessOptions& options) {
  std::vector<at::Tensor> boxes, scores, labels;
  std::vector<int64_t> offsets = {0};
  for (size_t i = 0; i < image_sizes.size(); ++i) {
    ImageDetections d = detect_image(forward, static_cast<int64_t>(i), image_sizes[i], options);
    if (!original_sizes.empty())
      d.boxes = resize_boxes(d.boxes, static_cast<double>(image_sizes[i][0]), static_cast<double>(image_sizes[i][1]),
                             original_sizes[i][0], original_sizes[i][1]);
    offsets.push_back(offsets.back() + d.scores.size(0));
    boxes.push_back(std::move(d.boxes));
    scores.push_back(std::move(d.scores));
    labels.push_back(std::move(d.labels));
  }
  const at::Device device = forward.head.cls_logits.device();
  return {at::cat(boxes, 0), at::cat(scores, 0), at::cat(labels, 0), at::tensor(offsets, at::kLong).to(device)};
}

}  // namespace tp::detection
