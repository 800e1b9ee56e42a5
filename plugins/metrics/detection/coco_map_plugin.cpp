// org.torchhost.coco_map: COCO box mAP and mAR (the twelve numbers pycocotools prints) over a
// whole evaluation. Detections and ground truth are kept as rows gathered across ranks (plugin ABI
// 1.7), not sums: AP ranks every detection of the split by score. update() appends a batch's rows
// on the device; compute() reads them once and runs coco_eval.cpp.
#include <ATen/ATen.h>
#include <c10/util/StringUtil.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "coco_eval.h"
#include "tp/cpp/config.h"
#include "tp/cpp/gathered_rows.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/metric_adapter.h"
#include "tp/cpp/tensor.h"
#include "tp/cpp/value_names.h"

namespace tp::detection_metrics {
namespace {

constexpr const char* kId = "org.torchhost.coco_map";

/// Beside the 12 COCO numbers, one value per class fits the room a host gives compute()
/// (TP_METRIC_VALUE_CAPACITY: 8192): LVIS' 1,203 classes and more.
constexpr int64_t kMaxPerClass = int64_t{TP_METRIC_VALUE_CAPACITY} - 12;

/// "map_class_0" ... "map_class_8179": not "map_<c>", whose classes 50 and 75 would be the
/// summary's map_50 and map_75.
constexpr tp::cpp::IndexedValueNames<kMaxPerClass> kClassNames("map_class_");

/// torchmetrics' MeanAveragePrecision names, in COCOeval.stats' order.
constexpr std::array<const char*, 12> kStatNames{"map",   "map_50", "map_75", "map_small", "map_medium", "map_large",
                                                 "mar_1", "mar_10", "mar_100", "mar_small", "mar_medium", "mar_large"};

// Row layouts (float64: image ids and labels are exact up to 2^53, float32 boxes and scores exactly).
constexpr int64_t kDetectionColumns = 7;  // image, label, score, x1, y1, x2, y2
constexpr int64_t kObjectColumns = 8;     // image, label, x1, y1, x2, y2, area (NaN: the box's), crowd

struct Names {
  std::string boxes, scores, labels;                                  // model outputs (ragged)
  std::string target_boxes, target_labels, image_id, iscrowd, areas;  // batch fields
};

/// The tensor `name` of `fields`, or nullptr when absent.
const at::Tensor* optional_field(const tp::cpp::Fields& fields, const std::string& name) {
  for (uint32_t i = 0; i < fields.size(); ++i)
    if (fields.data()[i].name != nullptr && name == fields.data()[i].name) return &tp::cpp::unwrap(fields.data()[i].tensor);
  return nullptr;
}

/// A ground-truth field `configured` in the config, or "" for the batch's own: "gt_<plain>" when
/// it has one (coco_detection's val/test annotations in the file's pixels, where detections are
/// reported), else "<plain>". Scoring against the resized training `boxes` instead gave a trial's
/// FCOS run mAP 0.00086 for 0.204 without a word.
std::string truth_field(const tp::cpp::Fields& targets, const std::string& configured, const char* plain) {
  if (!configured.empty()) return configured;
  const std::string gt = std::string("gt_") + plain;
  return optional_field(targets, gt) != nullptr ? gt : std::string(plain);
}

[[noreturn]] void bad_input(const std::string& what) {
  throw tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT, std::string(kId) + ": " + what);
}

std::string describe(const at::Tensor& t) { return std::string(c10::toString(t.scalar_type())) + " " + c10::str(t.sizes()); }

/// A ragged field's offsets "<name>_offsets", int64 [B + 1].
const at::Tensor& offsets_of(const tp::cpp::Fields& fields, const std::string& name, int64_t batch, const char* role) {
  const at::Tensor& offsets = fields.get(name + "_offsets");
  if (offsets.dim() != 1 || offsets.scalar_type() != at::kLong || (batch >= 0 && offsets.size(0) != batch + 1))
    bad_input(std::string(role) + " '" + name + "_offsets' must be int64 [B + 1]" +
              (batch >= 0 ? " = [" + std::to_string(batch + 1) + "]" : "") + " (the rows of '" + name +
              "' per sample), got " + describe(offsets));
  return offsets;
}

/// Each row's image id: the sample's id repeated over its rows (no device sync: the total is known).
at::Tensor row_images(const at::Tensor& image_ids, const at::Tensor& offsets, int64_t rows) {
  return at::repeat_interleave(image_ids, offsets.diff(), 0, rows);
}

/// AP / AR of boxes, COCO's way. State: the rows of every detection and every object seen.
class CocoMap {
 public:
  CocoMap(Names names, int64_t num_classes, bool per_class)
      : names_(std::move(names)), classes_(num_classes), per_class_(per_class) {}

  std::vector<tp::cpp::StateSlot> state() { return {}; }
  std::vector<tp::cpp::GatheredSlot> gathered_state() { return {{"detections", &detections_}, {"objects", &objects_}}; }

  void update(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) {
    // The ground truth's fields in this batch (the config's, or the batch's own: truth_field).
    truth_.target_boxes = truth_field(targets, names_.target_boxes, "boxes");
    truth_.target_labels = truth_field(targets, names_.target_labels, "labels");
    truth_.iscrowd = truth_field(targets, names_.iscrowd, "iscrowd");
    truth_.areas = truth_field(targets, names_.areas, "areas");
    const at::Tensor& image_ids = targets.get(names_.image_id);
    if (image_ids.dim() < 1 || image_ids.numel() != image_ids.size(0) || image_ids.is_floating_point())
      bad_input("target '" + names_.image_id + "' must be an integer id per sample, [B] or [B, 1], got " +
                describe(image_ids) + "; set image_id to the dataset's field that names each image");
    const at::Tensor ids = image_ids.reshape({-1}).to(at::kDouble);
    const int64_t batch = ids.size(0);

    const at::Tensor& boxes = outputs.get(names_.boxes);
    const at::Tensor& scores = outputs.get(names_.scores);
    const at::Tensor& labels = outputs.get(names_.labels);
    const int64_t found = boxes.dim() == 2 ? boxes.size(0) : -1;
    if (found < 0 || boxes.size(1) != 4 || !boxes.is_floating_point() || scores.dim() != 1 || scores.size(0) != found ||
        labels.dim() != 1 || labels.size(0) != found || labels.is_floating_point())
      bad_input("expected ragged detections: outputs '" + names_.boxes + "' floating [D, 4] (x1, y1, x2, y2), '" +
                names_.scores + "' [D] and '" + names_.labels + "' integer [D], got " + describe(boxes) + ", " +
                describe(scores) + " and " + describe(labels));
    const at::Tensor& found_offsets = offsets_of(outputs, names_.boxes, batch, "output");
    detections_.append(at::cat({row_images(ids, found_offsets, found).unsqueeze(1), labels.to(at::kDouble).unsqueeze(1),
                                scores.to(at::kDouble).unsqueeze(1), boxes.to(at::kDouble)},
                               1),
                       std::string(kId) + ": detections");

    const at::Tensor& truth = targets.get(truth_.target_boxes);
    const at::Tensor& truth_labels = targets.get(truth_.target_labels);
    const int64_t objects = truth.dim() == 2 ? truth.size(0) : -1;
    if (objects < 0 || truth.size(1) != 4 || !truth.is_floating_point() || truth_labels.dim() != 1 ||
        truth_labels.size(0) != objects || truth_labels.is_floating_point())
      bad_input("expected ragged ground truth: targets '" + truth_.target_boxes + "' floating [N, 4] (x1, y1, x2, y2) and '" +
                truth_.target_labels + "' integer [N], got " + describe(truth) + " and " + describe(truth_labels));
    const at::Tensor& truth_offsets = offsets_of(targets, truth_.target_boxes, batch, "target");
    const at::Tensor zeros = at::zeros({objects}, truth.options().dtype(at::kDouble));
    // No areas field: NaN, read as the box's area in compute(). A given 0 stays 0, as pycocotools
    // keeps a JSON's "area": 0 (a small object); reading 0 as "absent" moved a trial's six large
    // boxes out of small (map_small 0.2029 for pycocotools' 0.2044, map_medium 0.2510 for -1).
    const at::Tensor areas = optional_column(targets, truth_.areas, objects, at::full_like(zeros, std::nan("")));
    const at::Tensor crowd = optional_column(targets, truth_.iscrowd, objects, zeros);
    objects_.append(at::cat({row_images(ids, truth_offsets, objects).unsqueeze(1), truth_labels.to(at::kDouble).unsqueeze(1),
                             truth.to(at::kDouble), areas.unsqueeze(1), crowd.unsqueeze(1)},
                            1),
                    std::string(kId) + ": objects");
  }

  std::vector<tp_scalar_t> compute() {
    const at::Tensor detections = detections_.rows().cpu().contiguous();
    const at::Tensor objects = objects_.rows().cpu().contiguous();
    const CocoResult result = coco_evaluate(read_detections(detections), read_objects(objects), classes_);
    std::vector<tp_scalar_t> values;
    for (std::size_t i = 0; i < kStatNames.size(); ++i) values.push_back({kStatNames[i], result.stats[i]});
    if (per_class_)
      for (int64_t c = 0; c < classes_; ++c)
        values.push_back({kClassNames[static_cast<std::size_t>(c)], result.class_ap[static_cast<std::size_t>(c)]});
    return values;
  }

 private:
  /// The optional ragged per-object field `name` as float64 [N], or `fallback` when unnamed.
  at::Tensor optional_column(const tp::cpp::Fields& targets, const std::string& name, int64_t objects,
                             const at::Tensor& fallback) const {
    if (name.empty()) return fallback;
    const at::Tensor* column = optional_field(targets, name);
    if (column == nullptr) return fallback;
    if (column->numel() != objects || (column->dim() != 1 && !(column->dim() == 2 && column->size(1) == 1)))
      bad_input("target '" + name + "' must hold one value per object of '" + truth_.target_boxes + "', [" +
                std::to_string(objects) + "], got " + describe(*column));
    return column->reshape({-1}).to(at::kDouble);
  }

  int64_t checked_label(double label, const char* what) const {
    if (!(label >= 0 && label < static_cast<double>(classes_)))
      bad_input(std::string(what) + " label " + c10::str(label) + " is not a class in [0, " + std::to_string(classes_) +
                "): check num_classes against the dataset and the model");
    return static_cast<int64_t>(label);
  }

  /// A box from float32 corners as torchmetrics hands it to pycocotools: x, y, then the width and
  /// height subtracted in float32 (torchvision's box_convert), widened to float64.
  static CocoBox box_from_corners(const double* xyxy) {
    const float x1 = static_cast<float>(xyxy[0]), y1 = static_cast<float>(xyxy[1]);
    return {x1, y1, static_cast<double>(static_cast<float>(xyxy[2]) - x1), static_cast<double>(static_cast<float>(xyxy[3]) - y1)};
  }

  std::vector<CocoDetection> read_detections(const at::Tensor& rows) const {
    std::vector<CocoDetection> out;
    const double* r = rows.data_ptr<double>();
    for (int64_t i = 0; i < rows.size(0); ++i, r += kDetectionColumns) {
      // A NaN score would break the ranking (no order holds), a NaN box every IoU with it.
      if (!std::isfinite(r[2]) || !std::isfinite(r[3]) || !std::isfinite(r[4]) || !std::isfinite(r[5]) || !std::isfinite(r[6]))
        bad_input("a detection of image " + std::to_string(static_cast<int64_t>(r[0])) + " has a non-finite score or box (score " +
                  c10::str(r[2]) + ", box " + c10::str(r[3]) + ", " + c10::str(r[4]) + ", " + c10::str(r[5]) + ", " +
                  c10::str(r[6]) + "): the model's outputs '" + names_.scores + "' / '" + names_.boxes +
                  "' went non-finite; COCO mAP cannot rank them");
      out.push_back({static_cast<int64_t>(r[0]), checked_label(r[1], "detection"), r[2], box_from_corners(r + 3)});
    }
    return out;
  }

  std::vector<CocoObject> read_objects(const at::Tensor& rows) const {
    std::vector<CocoObject> out;
    const double* r = rows.data_ptr<double>();
    for (int64_t i = 0; i < rows.size(0); ++i, r += kObjectColumns) {
      const CocoBox box = box_from_corners(r + 2);
      // No area given (NaN, update()): the box's, as torchmetrics and coco_detection fill it.
      const double area = std::isnan(r[6]) ? box.w * box.h : r[6];
      out.push_back({static_cast<int64_t>(r[0]), checked_label(r[1], "ground-truth"), box, area, r[7] != 0});
    }
    return out;
  }

  Names names_;
  Names truth_; ///< the ground truth's fields update() read last (the config's, or the batch's own)
  int64_t classes_;
  bool per_class_;
  tp::cpp::GatheredRows detections_{{kDetectionColumns}, at::kDouble};
  tp::cpp::GatheredRows objects_{{kObjectColumns}, at::kDouble};
};

std::shared_ptr<CocoMap> make_coco_map(const tp::cpp::ConfigReader& cfg) {
  const int64_t num_classes = cfg.get_int("num_classes");
  const bool per_class = cfg.get_bool("per_class");
  tp::cpp::require_config(num_classes >= 1 && num_classes <= 100000, kId, "num_classes", "must be in [1, 100000]",
                          std::to_string(num_classes));
  tp::cpp::require_config(!per_class || num_classes <= kMaxPerClass, kId, "per_class",
                          "reports one value per class and the host reads at most " + std::to_string(kMaxPerClass) +
                              " of them besides the 12 COCO numbers: set per_class = false for num_classes = " +
                              std::to_string(num_classes),
                          "true");
  Names names{cfg.get_string("boxes"),        cfg.get_string("scores"),   cfg.get_string("labels"),
              cfg.get_string("target_boxes"), cfg.get_string("target_labels"), cfg.get_string("image_id"),
              cfg.get_string("iscrowd"),      cfg.get_string("areas")};
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"boxes", &names.boxes},
                                   {"scores", &names.scores},
                                   {"labels", &names.labels},
                                   {"image_id", &names.image_id}})
    tp::cpp::require_config(!value->empty(), kId, key, "must name a field", "\"\"");
  return std::make_shared<CocoMap>(std::move(names), num_classes, per_class);
}

const tp_config_key_t kKeys[] = {
    tp::cpp::config_key("num_classes", TP_CFG_INT, "91", "classes: labels in [0, num_classes) (COCO's category ids: 91)"),
    tp::cpp::config_key("boxes", TP_CFG_STRING, "\"detection_boxes\"",
                        "model output: detected boxes [D, 4] x1, y1, x2, y2, ragged (with '<name>_offsets' [B + 1])"),
    tp::cpp::config_key("scores", TP_CFG_STRING, "\"detection_scores\"", "model output: each detection's score [D]"),
    tp::cpp::config_key("labels", TP_CFG_STRING, "\"detection_labels\"", "model output: each detection's class [D]"),
    tp::cpp::config_key("target_boxes", TP_CFG_STRING, "\"\"",
                        "batch field: ground-truth boxes [N, 4] x1, y1, x2, y2, ragged (with '<name>_offsets'); \"\": "
                        "gt_boxes when the batch has it (coco_detection's val/test: the file's pixels, where detections "
                        "are), else boxes"),
    tp::cpp::config_key("target_labels", TP_CFG_STRING, "\"\"",
                        "batch field: each ground-truth box's class [N]; \"\": gt_labels when the batch has it, else labels"),
    tp::cpp::config_key("image_id", TP_CFG_STRING, "\"image_id\"",
                        "batch field: an integer id per image [B]; breaks score ties in image order, so distributed equals one process"),
    tp::cpp::config_key("iscrowd", TP_CFG_STRING, "\"\"",
                        "batch field (optional; absent: none): 1 marks a crowd region [N], neither missed nor matched; "
                        "\"\": gt_iscrowd when the batch has it, else iscrowd"),
    tp::cpp::config_key("areas", TP_CFG_STRING, "\"\"",
                        "batch field (optional; absent: the box's): object area [N] for the small / medium / large "
                        "split, 0 kept as pycocotools keeps it (small); \"\": gt_areas when the batch has it, else areas"),
    tp::cpp::config_key("per_class", TP_CFG_BOOL, "false", "also report map_class_<c>, AP per class (num_classes <= 8180)"),
};

const tp_descriptor_t kDescriptor = tp::cpp::metric_descriptor(
    kId, "1.0.0",
    "COCO box mAP / mAR as pycocotools (map, map_50, map_75, map_small/medium/large, mar_1/10/100, "
    "mar_small/medium/large), over detections and ground truth gathered across ranks",
    kKeys);

const tp::cpp::Component kComponents[] = {tp::cpp::metric_component<CocoMap, kDescriptor, &make_coco_map>()};

}  // namespace
}  // namespace tp::detection_metrics

TP_DEFINE_PLUGIN("detection_metrics", TP_TORCH_BUILD_INFO_INIT, tp::detection_metrics::kComponents)
