// detection: FCOS's evaluation output, torchvision's FCOS.postprocess_detections followed by
// GeneralizedRCNNTransform.postprocess (the boxes scaled back to the size the image had before
// the dataset resized it), op for op. The detections of the batch come out ragged
// (plugin_api/README.md "Variable-size fields"): rows concatenated, offsets [B + 1].
//
// It reads per-image counts on the host (which boxes pass the threshold, which survive NMS), so
// on a GPU it synchronises: evaluation only, never the training step.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <vector>

#include "fcos_net.h"

namespace tp::detection {

/// torchvision FCOS's post-processing parameters (its defaults).
struct PostprocessOptions {
  double score_thresh = 0.2;        ///< a candidate needs sqrt(sigmoid(cls) * sigmoid(ctrness)) > this
  double nms_thresh = 0.6;          ///< batched_nms suppresses IoU > this within a class
  int64_t detections_per_img = 100; ///< kept after NMS, best first
  int64_t topk_candidates = 1000;   ///< kept per level before NMS, best first
};

/// The detections of a batch, ragged: image i owns rows offsets[i] .. offsets[i + 1] - 1 of
/// boxes, scores and labels, best score first.
struct Detections {
  at::Tensor boxes;    ///< [D, 4] (x1, y1, x2, y2), the head's dtype
  at::Tensor scores;   ///< [D]
  at::Tensor labels;   ///< [D] int64, indices of the logits
  at::Tensor offsets;  ///< [B + 1] int64
};

/// The detections of `forward` (a batch of B images). `image_sizes[i]` (height, width) is image
/// i's own size inside the padded batch: its boxes are clipped to it. `original_sizes`, empty or
/// one (height, width) per image: when given, boxes are scaled from image_sizes[i] to it, as
/// torchvision's transform.postprocess.
Detections postprocess_detections(const FcosForward& forward, const std::vector<std::array<int64_t, 2>>& image_sizes,
                                  const std::vector<std::array<double, 2>>& original_sizes,
                                  const PostprocessOptions& options);

}  // namespace tp::detection
