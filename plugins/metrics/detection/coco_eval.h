// COCO box evaluation: pycocotools' COCOeval (iouType "bbox": evaluate, accumulate, summarize)
// re-done in C++ on plain values, so that org.torchhost.coco_map reports the twelve numbers
// pycocotools prints for the same detections, to the last bits of a float64 mean.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace tp::detection_metrics {

/// A box as pycocotools keeps it: corner (x, y), width, height, in pixels.
struct CocoBox {
  double x = 0, y = 0, w = 0, h = 0;
};

/// One scored detection of image `image` (any integer id), class `label` in [0, num_classes).
struct CocoDetection {
  int64_t image = 0;
  int64_t label = 0;
  double score = 0;
  CocoBox box;
};

/// One ground-truth object. `area` decides the object's size class (small < 32², large > 96²);
/// a crowd region is never missed, and a detection inside it is neither right nor wrong.
struct CocoObject {
  int64_t image = 0;
  int64_t label = 0;
  CocoBox box;
  double area = 0;
  bool crowd = false;
};

/// COCOeval.stats, in its order: AP over IoU 0.50:0.95, AP50, AP75, AP small / medium / large,
/// AR with at most 1, 10, 100 detections per image, AR small / medium / large. -1 where no
/// class has a (non-crowd, in-range) object, as pycocotools.
using CocoStats = std::array<double, 12>;

/// What coco_evaluate returns: the stats and, per class, AP over IoU 0.50:0.95 (all sizes, 100
/// detections per image; -1 for a class without objects).
struct CocoResult {
  CocoStats stats{};
  std::vector<double> class_ap;
};

/// Evaluates `detections` against `objects` as pycocotools does with one category per class in
/// [0, num_classes), every image id that occurs, maxDets (1, 10, 100), IoU thresholds
/// 0.50:0.05:0.95 and 101 recall points. Within an image, detections keep their order in
/// `detections` wherever scores tie (pycocotools' stable sort of its results list); across
/// images, ties are broken by ascending image id (pycocotools' image order). So the result does
/// not depend on the order of images in the inputs: rows gathered from ranks in any order give
/// the single-process values. Labels outside [0, num_classes) are the caller's to refuse.
CocoResult coco_evaluate(const std::vector<CocoDetection>& detections, const std::vector<CocoObject>& objects,
                         int64_t num_classes);

}  // namespace tp::detection_metrics
