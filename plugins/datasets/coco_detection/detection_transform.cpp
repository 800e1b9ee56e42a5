#include "detection_transform.h"

#include <algorithm>

#include "rng.h"

namespace tp::coco_detection {
namespace {

using datasets::Rng;

/// Streams of the decisions image_folder does not make (its kTagFlip is the mirror here too).
/// Fixed forever: changing one changes every augmented sample of every run that used it.
enum : uint64_t {
  kTagMinSize = 13,      ///< which min_size (train)
  kTagScaleJitter = 14,  ///< ScaleJitter's uniform draw
};

/// torch.rand's float32 in [0, 1): 24 random bits.
float uniform_float(Rng rng) { return static_cast<float>(rng.next() >> 40) * 0x1.0p-24f; }

}  // namespace

Size2 shortest_side_size(Size2 source, int min_size, int max_size) {
  const double r = std::min(static_cast<double>(min_size) / std::min(source.h, source.w),
                            static_cast<double>(max_size) / std::max(source.h, source.w));
  return {std::max(1, static_cast<int>(source.h * r)), std::max(1, static_cast<int>(source.w * r))};
}

Size2 scale_jitter_size(Size2 source, int target, const std::array<double, 2>& range, float u) {
  // torch: `lo + torch.rand(1) * (hi - lo)` and `min(...) * scale` are float32 tensor ops with
  // Python floats rounded to float32; `int(orig_width * r)` too. One rounding per step, as here
  // (each product or sum is its own statement value; no FMA on this target's flags).
  const float spread = static_cast<float>(range[1] - range[0]);
  const float scale = static_cast<float>(range[0]) + u * spread;
  const float base = static_cast<float>(std::min(static_cast<double>(target) / source.h,
                                                 static_cast<double>(target) / source.w));
  const float r = base * scale;
  return {std::max(1, static_cast<int>(static_cast<float>(source.h) * r)),
          std::max(1, static_cast<int>(static_cast<float>(source.w) * r))};
}

DetectionPlan plan_detection(Size2 source, const DetectionOptions& o, uint64_t seed) {
  DetectionPlan p;
  p.source = source;
  if (o.random && o.jitter()) {
    p.jitter_u = uniform_float(Rng(seed, kTagScaleJitter));
    p.sized = scale_jitter_size(source, o.max_size, o.scale_jitter, p.jitter_u);
  } else {
    const int n = static_cast<int>(o.min_size.size());
    p.min_size = o.random ? o.min_size[static_cast<std::size_t>(Rng(seed, kTagMinSize).below(n))] : o.min_size.back();
    p.sized = shortest_side_size(source, p.min_size, o.max_size);
  }
  p.flip = o.random && o.hflip > 0.0 && Rng(seed, datasets::kTagFlip).uniform() < o.hflip;
  return p;
}

void training_boxes(const CocoSplit& split, const CocoImage& image, Size2 source, std::vector<float>& boxes,
                    std::vector<int64_t>& labels) {
  const auto w = static_cast<float>(source.w), h = static_cast<float>(source.h);
  for (uint32_t k = 0; k < image.object_count; ++k) {
    const CocoObject& o = split.objects[image.first_object + k];
    if (o.crowd) continue;
    const float x1 = std::clamp(o.x, 0.f, w), y1 = std::clamp(o.y, 0.f, h);
    const float x2 = std::clamp(o.x + o.w, 0.f, w), y2 = std::clamp(o.y + o.h, 0.f, h);
    if (!(x2 > x1 && y2 > y1)) continue;
    boxes.insert(boxes.end(), {x1, y1, x2, y2});
    labels.push_back(o.label);
  }
}

void transform_boxes(std::vector<float>& boxes, const DetectionPlan& plan) {
  const float rx = static_cast<float>(plan.sized.w) / static_cast<float>(plan.source.w);
  const float ry = static_cast<float>(plan.sized.h) / static_cast<float>(plan.source.h);
  const auto width = static_cast<float>(plan.sized.w);
  for (std::size_t i = 0; i + 3 < boxes.size(); i += 4) {
    float x1 = boxes[i] * rx, x2 = boxes[i + 2] * rx;
    if (plan.flip) {
      const float mirrored_x1 = width - x2;
      x2 = width - x1;
      x1 = mirrored_x1;
    }
    boxes[i] = x1;
    boxes[i + 1] *= ry;
    boxes[i + 2] = x2;
    boxes[i + 3] *= ry;
  }
}

}  // namespace tp::coco_detection
