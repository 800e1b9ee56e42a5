// pycocotools' COCOeval for boxes, step by step (cocoeval.py: computeIoU, evaluateImg,
// accumulate, summarize; maskApi.c: bbIou). Every comparison and division is pycocotools' own,
// in float64, so that matches, precision and recall come out identical; only the final means add
// in another order (numpy sums pairwise), a difference of ~1e-16.
#include "coco_eval.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <numeric>
#include <utility>

namespace tp::detection_metrics {
namespace {

constexpr int kThresholds = 10;  // IoU 0.50, 0.55, ..., 0.95
constexpr int kRecalls = 101;    // recall 0.00, 0.01, ..., 1.00
constexpr int kAreaRanges = 4;   // all, small, medium, large
constexpr int kMaxDetsCount = 3;
constexpr std::array<std::size_t, kMaxDetsCount> kMaxDets{1, 10, 100};
constexpr std::array<std::pair<double, double>, kAreaRanges> kAreaRange{
    {{0.0, 1e10}, {0.0, 32.0 * 32.0}, {32.0 * 32.0, 96.0 * 96.0}, {96.0 * 96.0, 1e10}}};

/// np.linspace(start, stop, num) as numpy computes it: start + i * ((stop - start) / (num - 1)),
/// the last value exactly stop. The thresholds must be these doubles: a match is iou >= t.
template <int N>
std::array<double, N> linspace(double start, double stop) {
  std::array<double, N> out{};
  const double step = (stop - start) / (N - 1);
  for (int i = 0; i < N; ++i) out[i] = static_cast<double>(i) * step + start;
  out[N - 1] = stop;
  return out;
}

/// maskApi.c bbIou: intersection over union, or over the detection's area for a crowd region.
double box_iou(const CocoBox& d, const CocoBox& g, bool crowd) {
  const double w = std::fmin(d.w + d.x, g.w + g.x) - std::fmax(d.x, g.x);
  if (w <= 0) return 0;
  const double h = std::fmin(d.h + d.y, g.h + g.y) - std::fmax(d.y, g.y);
  if (h <= 0) return 0;
  const double intersection = w * h;
  const double detection_area = d.w * d.h;
  const double union_area = crowd ? detection_area : detection_area + g.w * g.h - intersection;
  return intersection / union_area;
}

/// evaluateImg's result for one image, class and area range: the image's detections by score
/// (at most 100), whether each matched an object and whether it is ignored, per threshold.
struct ImageEval {
  std::vector<double> scores;
  std::vector<uint8_t> matched;  // [threshold][detection]
  std::vector<uint8_t> ignored;  // [threshold][detection]
  int64_t counted_objects = 0;   // objects neither crowd nor outside the area range
};

/// One image's detections and objects of one class, in input order.
struct ImageClass {
  std::vector<const CocoDetection*> detections;
  std::vector<const CocoObject*> objects;
};

/// computeIoU + evaluateImg for every area range of one (image, class).
std::array<ImageEval, kAreaRanges> evaluate_image(const ImageClass& input, const std::array<double, kThresholds>& thresholds) {
  // Detections by score, stable (np.argsort kind="mergesort"), at most maxDets[-1].
  std::vector<const CocoDetection*> dets = input.detections;
  std::stable_sort(dets.begin(), dets.end(), [](const auto* a, const auto* b) { return a->score > b->score; });
  if (dets.size() > kMaxDets.back()) dets.resize(kMaxDets.back());
  const std::size_t nd = dets.size();

  std::array<ImageEval, kAreaRanges> out;
  for (int a = 0; a < kAreaRanges; ++a) {
    const auto [low, high] = kAreaRange[static_cast<std::size_t>(a)];
    // Objects: counted ones first, stable (gtind = argsort(_ignore, mergesort)).
    std::vector<const CocoObject*> objects = input.objects;
    const auto ignored_object = [&](const CocoObject* o) { return o->crowd || o->area < low || o->area > high; };
    std::stable_sort(objects.begin(), objects.end(),
                     [&](const auto* x, const auto* y) { return !ignored_object(x) && ignored_object(y); });
    const std::size_t ng = objects.size();
    std::vector<double> ious(nd * ng);
    for (std::size_t d = 0; d < nd; ++d)
      for (std::size_t g = 0; g < ng; ++g) ious[d * ng + g] = box_iou(dets[d]->box, objects[g]->box, objects[g]->crowd);

    ImageEval& e = out[static_cast<std::size_t>(a)];
    e.scores.reserve(nd);
    for (const auto* d : dets) e.scores.push_back(d->score);
    e.matched.assign(kThresholds * nd, 0);
    e.ignored.assign(kThresholds * nd, 0);
    for (const auto* o : objects) e.counted_objects += ignored_object(o) ? 0 : 1;
    for (int t = 0; t < kThresholds; ++t) {
      std::vector<uint8_t> object_taken(ng, 0);
      for (std::size_t d = 0; d < nd; ++d) {
        double best = std::min(thresholds[static_cast<std::size_t>(t)], 1 - 1e-10);
        std::ptrdiff_t m = -1;
        for (std::size_t g = 0; g < ng; ++g) {
          if (object_taken[g] && !objects[g]->crowd) continue;  // matched already, and not a crowd
          // matched a counted object, and only ignored ones are left
          if (m > -1 && !ignored_object(objects[static_cast<std::size_t>(m)]) && ignored_object(objects[g])) break;
          if (ious[d * ng + g] < best) continue;
          best = ious[d * ng + g];
          m = static_cast<std::ptrdiff_t>(g);
        }
        if (m == -1) continue;
        e.ignored[t * nd + d] = ignored_object(objects[static_cast<std::size_t>(m)]) ? 1 : 0;
        e.matched[t * nd + d] = 1;
        object_taken[static_cast<std::size_t>(m)] = 1;
      }
      // An unmatched detection outside the area range is ignored.
      for (std::size_t d = 0; d < nd; ++d) {
        const double area = dets[d]->box.w * dets[d]->box.h;
        if (!e.matched[t * nd + d] && (area < low || area > high)) e.ignored[t * nd + d] = 1;
      }
    }
  }
  return out;
}

/// The mean of the entries > -1 of `values`, or -1 when there is none (summarize()).
double mean_defined(const std::vector<double>& values) {
  double sum = 0;
  std::size_t count = 0;
  for (const double v : values)
    if (v > -1) {
      sum += v;
      ++count;
    }
  return count == 0 ? -1.0 : sum / static_cast<double>(count);
}

}  // namespace

CocoResult coco_evaluate(const std::vector<CocoDetection>& detections, const std::vector<CocoObject>& objects,
                         int64_t num_classes) {
  const auto thresholds = linspace<kThresholds>(0.5, 0.95);
  const auto recalls = linspace<kRecalls>(0.0, 1.0);
  const std::size_t classes = static_cast<std::size_t>(std::max<int64_t>(num_classes, 0));

  // (class, image) -> its detections and objects in input order; images ascending (p.imgIds sorted).
  std::vector<std::map<int64_t, ImageClass>> by_class(classes);
  for (const CocoDetection& d : detections) by_class[static_cast<std::size_t>(d.label)][d.image].detections.push_back(&d);
  for (const CocoObject& o : objects) by_class[static_cast<std::size_t>(o.label)][o.image].objects.push_back(&o);

  // precision[t][r][k][a][m] and recall[t][k][a][m], -1 where undefined (accumulate()).
  const auto p_index = [&](int t, int r, std::size_t k, int a, int m) {
    return ((((static_cast<std::size_t>(t) * kRecalls + r) * classes + k) * kAreaRanges + a) * kMaxDetsCount + m);
  };
  const auto r_index = [&](int t, std::size_t k, int a, int m) {
    return (((static_cast<std::size_t>(t) * classes + k) * kAreaRanges + a) * kMaxDetsCount + m);
  };
  std::vector<double> precision(kThresholds * kRecalls * classes * kAreaRanges * kMaxDetsCount, -1.0);
  std::vector<double> recall(kThresholds * classes * kAreaRanges * kMaxDetsCount, -1.0);

  for (std::size_t k = 0; k < classes; ++k) {
    std::vector<std::array<ImageEval, kAreaRanges>> images;
    for (const auto& [image, input] : by_class[k]) images.push_back(evaluate_image(input, thresholds));
    for (int a = 0; a < kAreaRanges; ++a) {
      int64_t counted = 0;
      for (const auto& e : images) counted += e[static_cast<std::size_t>(a)].counted_objects;
      if (counted == 0) continue;  // no object to find: undefined, left out of the means
      for (int m = 0; m < kMaxDetsCount; ++m) {
        // Every image's first maxDet detections, concatenated in image order, then by score
        // (stable: ties stay in image order).
        struct Entry {
          double score;
          const ImageEval* image;
          std::size_t index;
        };
        std::vector<Entry> entries;
        for (const auto& e : images) {
          const ImageEval& ie = e[static_cast<std::size_t>(a)];
          const std::size_t n = std::min(ie.scores.size(), kMaxDets[static_cast<std::size_t>(m)]);
          for (std::size_t i = 0; i < n; ++i) entries.push_back({ie.scores[i], &ie, i});
        }
        std::stable_sort(entries.begin(), entries.end(), [](const Entry& x, const Entry& y) { return x.score > y.score; });
        const std::size_t nd = entries.size();
        for (int t = 0; t < kThresholds; ++t) {
          std::vector<double> rc(nd), pr(nd);
          double tp = 0, fp = 0;
          for (std::size_t i = 0; i < nd; ++i) {
            const ImageEval& ie = *entries[i].image;
            const std::size_t at = static_cast<std::size_t>(t) * ie.scores.size() + entries[i].index;
            if (!ie.ignored[at]) (ie.matched[at] ? tp : fp) += 1;
            rc[i] = tp / static_cast<double>(counted);
            pr[i] = tp / (fp + tp + std::numeric_limits<double>::epsilon());  // np.spacing(1)
          }
          recall[r_index(t, k, a, m)] = nd > 0 ? rc.back() : 0.0;
          for (std::size_t i = nd; i-- > 1;)
            if (pr[i] > pr[i - 1]) pr[i - 1] = pr[i];
          for (int r = 0; r < kRecalls; ++r) {
            // np.searchsorted(rc, threshold, side="left"); past the end: 0 (pycocotools' except).
            const auto at = std::lower_bound(rc.begin(), rc.end(), recalls[static_cast<std::size_t>(r)]);
            precision[p_index(t, r, k, a, m)] = at == rc.end() ? 0.0 : pr[static_cast<std::size_t>(at - rc.begin())];
          }
        }
      }
    }
  }

  // summarize(): AP over (thresholds, recalls, classes) and AR over (thresholds, classes).
  const auto ap = [&](int only_threshold, int a, int m) {
    std::vector<double> values;
    for (int t = 0; t < kThresholds; ++t) {
      if (only_threshold >= 0 && t != only_threshold) continue;
      for (int r = 0; r < kRecalls; ++r)
        for (std::size_t k = 0; k < classes; ++k) values.push_back(precision[p_index(t, r, k, a, m)]);
    }
    return mean_defined(values);
  };
  const auto ar = [&](int a, int m) {
    std::vector<double> values;
    for (int t = 0; t < kThresholds; ++t)
      for (std::size_t k = 0; k < classes; ++k) values.push_back(recall[r_index(t, k, a, m)]);
    return mean_defined(values);
  };
  constexpr int kAll = -1, kIou50 = 0, kIou75 = 5;
  CocoResult result;
  result.stats = {ap(kAll, 0, 2), ap(kIou50, 0, 2), ap(kIou75, 0, 2), ap(kAll, 1, 2), ap(kAll, 2, 2), ap(kAll, 3, 2),
                  ar(0, 0),       ar(0, 1),         ar(0, 2),         ar(1, 2),       ar(2, 2),       ar(3, 2)};
  for (std::size_t k = 0; k < classes; ++k) {
    std::vector<double> values;
    for (int t = 0; t < kThresholds; ++t)
      for (int r = 0; r < kRecalls; ++r) values.push_back(precision[p_index(t, r, k, 0, 2)]);
    result.class_ap.push_back(mean_defined(values));
  }
  return result;
}

}  // namespace tp::detection_metrics
