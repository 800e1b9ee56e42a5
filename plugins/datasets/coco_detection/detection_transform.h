// The geometry of one detection sample, as torchvision's detection recipes define it: the output
// size (the shorter side to a min_size capped by max_size, as RandomShortestSize and
// GeneralizedRCNNTransform; or ScaleJitter's size), the horizontal flip, and what both do to the
// boxes. Every random choice is drawn up front from the host's per-sample seed (PLG-8) into a
// DetectionPlan, a pure function of (source size, options, seed) that the oracle replays.
// No OpenCV here: pixels are the dataset's business (pixel_io).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "coco_annotations.h"

namespace tp::coco_detection {

/// A height x width pair.
struct Size2 {
  int h = 0;
  int w = 0;
};

/// The transforms of one split, fixed at create().
struct DetectionOptions {
  std::vector<int> min_size{800};          ///< train: one drawn per sample; val/test: the last
  int max_size = 1333;                     ///< cap on the longer side; ScaleJitter's target size
  std::array<double, 2> scale_jitter{0.0, 0.0};  ///< train: ScaleJitter's scale_range; [0, 0] = off
  double hflip = 0.0;                      ///< train: mirror probability
  bool random = false;                     ///< true for the train split: the random steps run
  bool jitter() const { return scale_jitter[1] > 0.0; }
};

/// The decisions of one sample.
struct DetectionPlan {
  Size2 source;          ///< the decoded file's size
  Size2 sized;           ///< the output size
  int min_size = 0;      ///< the shorter side asked for (0 under ScaleJitter)
  float jitter_u = 0.f;  ///< ScaleJitter's torch.rand(1) draw (train with scale_jitter only)
  bool flip = false;
};

/// RandomShortestSize / GeneralizedRCNNTransform: r = min(min_size / shorter, max_size / longer)
/// in double, each side int(side * r) (floor); at least 1.
Size2 shortest_side_size(Size2 source, int min_size, int max_size);

/// torchvision.transforms.v2.ScaleJitter(target_size=(target, target), scale_range=range) with
/// torch.rand(1) = u: scale = lo + u * (hi - lo), r = min(target / h, target / w) * scale and
/// each side int(side * r), all in float32 as torch computes them; at least 1.
Size2 scale_jitter_size(Size2 source, int target, const std::array<double, 2>& range, float u);

/// The plan for a source of that size. Train: ScaleJitter when scale_jitter is set, else a
/// min_size drawn uniformly; a flip with probability hflip. Val/test: min_size.back(), no flip.
/// Draws only from `seed`, one stream per decision.
DetectionPlan plan_detection(Size2 source, const DetectionOptions& o, uint64_t seed);

/// torchvision's ConvertCocoPolysToMask: the non-crowd objects of `image` as x1, y1, x2, y2
/// (float32: x + w, y + h) clamped to [0, width] x [0, height], those with x2 <= x1 or y2 <= y1
/// dropped. Appends 4 floats per kept object to `boxes` and its label to `labels`.
void training_boxes(const CocoSplit& split, const CocoImage& image, Size2 source, std::vector<float>& boxes,
                    std::vector<int64_t>& labels);

/// Maps x1, y1, x2, y2 boxes of the source into the plan's output: each coordinate times the
/// float32 ratio output / source side (torchvision's resize_bounding_boxes), then x mirrored as
/// width - x with x1 and x2 swapped when the plan flips.
void transform_boxes(std::vector<float>& boxes, const DetectionPlan& plan);

}  // namespace tp::coco_detection
