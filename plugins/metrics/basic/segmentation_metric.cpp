// org.torchhost.mean_iou: semantic-segmentation scores (mean IoU, per-class IoU, pixel and
// mean class accuracy) from a confusion matrix accumulated over every labelled pixel seen.
// The definitions are torchmetrics 1.9's MulticlassJaccardIndex and MulticlassAccuracy with
// ignore_index (tests/plugins/metrics/segmentation_oracle compares them).
#include <c10/util/StringUtil.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include "metric.h"
#include "tp/cpp/value_names.h"

namespace tp::metrics {
namespace {

constexpr const char* kId = "org.torchhost.mean_iou";

/// The state is K^2 int64 counts: 128 MiB at this many classes. With the three summary scores,
/// one value per class fits the room a host gives compute() (TP_METRIC_VALUE_CAPACITY: 8192).
constexpr int64_t kMaxClasses = 4096;
static_assert(kMaxClasses + 3 <= TP_METRIC_VALUE_CAPACITY);

/// "iou_0" ... "iou_4095".
constexpr tp::cpp::IndexedValueNames<kMaxClasses> kIouNames("iou_");

/// The confusion matrix over labelled pixels: rows are the target class, columns the argmax
/// prediction. State: `confusion` (int64 [K, K]) and `out_of_range` (int64: target pixels neither
/// in [0, K) nor ignore_index, which compute() refuses, since update may not read them back).
class Segmentation : public Metric {
 public:
  Segmentation(std::string output, std::string target, int64_t num_classes, int64_t ignore_index, bool per_class)
      : output_(std::move(output)), target_(std::move(target)), classes_(num_classes), ignore_index_(ignore_index),
        per_class_(per_class), confusion_(at::zeros({num_classes, num_classes}, at::TensorOptions(at::kLong))),
        out_of_range_(at::zeros(at::IntArrayRef{}, at::TensorOptions(at::kLong))) {}

  std::vector<StateSlot> state() override { return {{"confusion", &confusion_}, {"out_of_range", &out_of_range_}}; }

  void update(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) override {
    const at::Tensor& logits = outputs.get(output_);
    const at::Tensor& mask = targets.get(target_);
    std::vector<int64_t> expected = logits.sizes().vec();
    if (logits.dim() >= 2) expected.erase(expected.begin() + 1);
    require_input(logits.dim() >= 2 && logits.size(1) == classes_ && !mask.is_floating_point() &&
                      mask.sizes() == at::IntArrayRef(expected),
                  kId,
                  "expected logits '" + output_ + "' [B, " + std::to_string(classes_) + ", ...] (num_classes " +
                      std::to_string(classes_) + ") and an integer mask '" + target_ +
                      "' shaped like them without the class dimension, got " + c10::str(logits.sizes()) + " and " +
                      std::string(mask.dtype().name()) + c10::str(mask.sizes()));
    const at::Tensor predicted = logits.argmax(1).reshape({-1});
    const at::Tensor truth = mask.reshape({-1}).to(at::kLong);
    const at::Tensor ignored = truth.eq(ignore_index_);
    const at::Tensor in_range = truth.ge(0).logical_and(truth.lt(classes_));
    const at::Tensor counted = in_range.logical_and(ignored.logical_not());
    // index_add_ with 0/1 weights instead of boolean-mask indexing (which would sync to size its
    // result) or bincount (which reads the largest index back); uncounted pixels add 0 at cell 0.
    const at::Tensor cell = at::where(counted, truth * classes_ + predicted, at::zeros_like(truth));
    confusion_.view({-1}).index_add_(0, cell, counted.to(at::kLong));
    out_of_range_.add_(in_range.logical_or(ignored).logical_not().sum());
  }

  std::vector<tp_scalar_t> compute() override {
    const int64_t bad = static_cast<int64_t>(read_scalar(out_of_range_));
    if (bad > 0)
      throw tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT,
                             std::string(kId) + ": " + std::to_string(bad) + " pixels of target '" + target_ +
                                 "' are neither a class in [0, " + std::to_string(classes_) +
                                 ") nor ignore_index " + std::to_string(ignore_index_) +
                                 ": check num_classes and ignore_index against the dataset's masks");
    const at::Tensor matrix = confusion_.cpu();
    const int64_t* m = matrix.data_ptr<int64_t>();
    const auto at_cell = [&](int64_t row, int64_t col) { return m[row * classes_ + col]; };
    int64_t total = 0, correct = 0;
    double iou_sum = 0.0, recall_sum = 0.0;
    int64_t iou_classes = 0, recall_classes = 0;
    std::vector<double> iou(static_cast<std::size_t>(classes_), 0.0);
    for (int64_t c = 0; c < classes_; ++c) {
      int64_t in_target = 0, predicted = 0;
      for (int64_t k = 0; k < classes_; ++k) {
        in_target += at_cell(c, k);
        predicted += at_cell(k, c);
      }
      const int64_t hits = at_cell(c, c);
      const int64_t uni = in_target + predicted - hits;
      total += in_target;
      correct += hits;
      // torchmetrics' zero_division = 0: a class absent from both target and prediction has IoU 0
      // in the per-class values, and neither mean counts it.
      if (uni > 0) iou[static_cast<std::size_t>(c)] = static_cast<double>(hits) / static_cast<double>(uni);
      if (uni == 0) continue;
      recall_sum += in_target > 0 ? static_cast<double>(hits) / static_cast<double>(in_target) : 0.0;
      ++recall_classes;
      if (c == ignore_index_) continue;  // an ignore_index inside [0, K) names no class of the mean IoU
      iou_sum += iou[static_cast<std::size_t>(c)];
      ++iou_classes;
    }
    std::vector<tp_scalar_t> values{
        {"miou", iou_classes > 0 ? iou_sum / static_cast<double>(iou_classes) : kNaN},
        {"pixel_accuracy", total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : kNaN},
        {"mean_accuracy", recall_classes > 0 ? recall_sum / static_cast<double>(recall_classes) : kNaN},
    };
    if (per_class_)
      for (int64_t c = 0; c < classes_; ++c)
        values.push_back({kIouNames[static_cast<std::size_t>(c)], iou[static_cast<std::size_t>(c)]});
    return values;
  }

 private:
  std::string output_;
  std::string target_;
  int64_t classes_;
  int64_t ignore_index_;
  bool per_class_;
  at::Tensor confusion_;
  at::Tensor out_of_range_;
};

const tp_config_key_t kKeys[] = {
    tp::cpp::config_key("output", TP_CFG_STRING, "\"out\"", "model output with per-pixel logits [B, C, H, W]; prediction = argmax"),
    tp::cpp::config_key("target", TP_CFG_STRING, "\"mask\"", "batch field with class indices [B, H, W] (integer)"),
    tp::cpp::config_key("num_classes", TP_CFG_INT, "21", "number of classes C (must match the logits)"),
    tp::cpp::config_key("ignore_index", TP_CFG_INT, "255", "mask value that is never counted (padding, void)"),
    tp::cpp::config_key("per_class", TP_CFG_BOOL, "true", "also report iou_<c> for each class c"),
};

}  // namespace

std::unique_ptr<Metric> make_segmentation(const tp::cpp::ConfigReader& cfg) {
  const int64_t num_classes = cfg.get_int("num_classes");
  const bool per_class = cfg.get_bool("per_class");
  if (num_classes < 1 || num_classes > kMaxClasses)
    throw tp::cpp::Failure(TP_ERR_CONFIG, std::string(kId) + ": num_classes must be in [1, " + std::to_string(kMaxClasses) +
                                              "], got " + std::to_string(num_classes));
  return std::make_unique<Segmentation>(cfg.get_string("output"), cfg.get_string("target"), num_classes,
                                        cfg.get_int("ignore_index"), per_class);
}

const tp_descriptor_t kSegmentationDescriptor = tp::cpp::metric_descriptor(
    kId, "1.0.0",
    "semantic segmentation from a confusion matrix over labelled pixels; values 'miou', 'pixel_accuracy', "
    "'mean_accuracy' and 'iou_<c>'",
    kKeys);

}  // namespace tp::metrics
