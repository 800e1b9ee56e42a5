// org.torchhost.accuracy and org.torchhost.f1: classification metrics over logits [B, C] and
// class-index targets [B] (or probability targets [B, C], read as their argmax).
#include <c10/util/StringUtil.h>
#include <ATen/ops/zeros.h>

#include <cmath>

#include "metric.h"

namespace tp::metrics {
namespace {

constexpr const char* kAccuracyId = "org.torchhost.accuracy";
constexpr const char* kF1Id = "org.torchhost.f1";
// Metric names cross the ABI in static storage, so top-k names come from a fixed table.
constexpr const char* kTopKNames[] = {"accuracy",       "top2_accuracy", "top3_accuracy", "top4_accuracy",
                                      "top5_accuracy",  "top6_accuracy", "top7_accuracy", "top8_accuracy",
                                      "top9_accuracy",  "top10_accuracy"};
constexpr int64_t kMaxTopK = static_cast<int64_t>(std::size(kTopKNames));

/// Finds logits [B, C] and targets, integer classes [B] or probabilities [B, C] (mixup, cutmix:
/// their argmax is the label), and checks that they fit together.
std::pair<at::Tensor, at::Tensor> logits_and_labels(const char* component, const tp::cpp::Fields& outputs,
                                                    const std::string& output, const tp::cpp::Fields& targets,
                                                    const std::string& target) {
  const at::Tensor& logits = outputs.get(output);
  const at::Tensor& labels = targets.get(target);
  const bool probabilities = labels.is_floating_point();
  require_input(logits.dim() == 2 &&
                    (probabilities ? labels.sizes() == logits.sizes()
                                   : labels.dim() == 1 && labels.size(0) == logits.size(0)),
                component,
                "expected logits '" + output + "' [B, C] and labels '" + target +
                    "' as integer classes [B] or probabilities [B, C], got " + c10::str(logits.sizes()) + " and " +
                    c10::str(labels.sizes()));
  return {logits, probabilities ? labels.argmax(1) : labels.to(at::kLong)};
}

/// Fraction of samples whose label is among the top_k logits. State: correct, total (int64).
class Accuracy : public Metric {
 public:
  Accuracy(std::string output, std::string target, int64_t top_k)
      : output_(std::move(output)), target_(std::move(target)), top_k_(top_k) {}

  std::vector<StateSlot> state() override { return {{"correct", &correct_}, {"total", &total_}}; }

  void update(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) override {
    auto [logits, labels] = logits_and_labels(kAccuracyId, outputs, output_, targets, target_);
    require_input(top_k_ <= logits.size(1), kAccuracyId,
                  "top_k " + std::to_string(top_k_) + " exceeds the " + std::to_string(logits.size(1)) + " classes");
    const at::Tensor hits = top_k_ == 1 ? logits.argmax(1).eq(labels)
                                        : std::get<1>(logits.topk(top_k_, 1)).eq(labels.unsqueeze(1)).any(1);
    correct_.add_(hits.sum());
    total_.add_(labels.size(0));
  }

  std::vector<tp_scalar_t> compute() override {
    const double total = read_scalar(total_);
    return {{kTopKNames[top_k_ - 1], total > 0 ? read_scalar(correct_) / total : kNaN}};
  }

 private:
  std::string output_;
  std::string target_;
  int64_t top_k_;
  at::Tensor correct_ = at::zeros(at::IntArrayRef{}, at::TensorOptions(at::kLong));
  at::Tensor total_ = at::zeros(at::IntArrayRef{}, at::TensorOptions(at::kLong));
};

/// Macro F1 of the argmax prediction. State: per-class true positives, false positives and
/// false negatives (int64 [num_classes]).
class F1 : public Metric {
 public:
  F1(std::string output, std::string target, int64_t num_classes)
      : output_(std::move(output)), target_(std::move(target)), num_classes_(num_classes),
        tp_(at::zeros({num_classes}, at::TensorOptions(at::kLong))), fp_(at::zeros({num_classes}, at::TensorOptions(at::kLong))),
        fn_(at::zeros({num_classes}, at::TensorOptions(at::kLong))) {}

  std::vector<StateSlot> state() override { return {{"tp", &tp_}, {"fp", &fp_}, {"fn", &fn_}}; }

  void update(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) override {
    auto [logits, labels] = logits_and_labels(kF1Id, outputs, output_, targets, target_);
    require_input(logits.size(1) == num_classes_, kF1Id,
                  "logits have " + std::to_string(logits.size(1)) + " classes, num_classes is " +
                      std::to_string(num_classes_));
    // index_add_ with 0/1 weights instead of boolean-mask indexing, which would sync to size
    // the result.
    const at::Tensor predicted = logits.argmax(1);
    const at::Tensor hit = predicted.eq(labels);
    const at::Tensor hit_count = hit.to(at::kLong);
    const at::Tensor miss_count = hit.logical_not().to(at::kLong);
    tp_.index_add_(0, labels, hit_count);
    fp_.index_add_(0, predicted, miss_count);
    fn_.index_add_(0, labels, miss_count);
  }

  std::vector<tp_scalar_t> compute() override {
    const at::Tensor tp = tp_.cpu(), fp = fp_.cpu(), fn = fn_.cpu();
    const int64_t* t = tp.data_ptr<int64_t>();
    const int64_t* p = fp.data_ptr<int64_t>();
    const int64_t* n = fn.data_ptr<int64_t>();
    // Classes that never occur and are never predicted have no defined F1; they are left out of
    // the mean rather than counted as 0 or 1.
    double sum = 0.0;
    int64_t classes = 0;
    for (int64_t c = 0; c < num_classes_; ++c) {
      const int64_t denominator = 2 * t[c] + p[c] + n[c];
      if (denominator == 0) continue;
      sum += 2.0 * static_cast<double>(t[c]) / static_cast<double>(denominator);
      ++classes;
    }
    return {{"f1", classes > 0 ? sum / static_cast<double>(classes) : kNaN}};
  }

 private:
  std::string output_;
  std::string target_;
  int64_t num_classes_;
  at::Tensor tp_;
  at::Tensor fp_;
  at::Tensor fn_;
};

const tp_config_key_t kAccuracyKeys[] = {
    tp::cpp::config_key("output", TP_CFG_STRING, "\"logits\"", "model output holding logits [B, C]"),
    tp::cpp::config_key("target", TP_CFG_STRING, "\"label\"", "batch field with class indices [B] or probabilities [B, C]"),
    tp::cpp::config_key("top_k", TP_CFG_INT, "1", "a hit is the label among the k largest logits (1..10)"),
};
const tp_config_key_t kF1Keys[] = {
    tp::cpp::config_key("output", TP_CFG_STRING, "\"logits\"", "model output holding logits [B, C]"),
    tp::cpp::config_key("target", TP_CFG_STRING, "\"label\"", "batch field with class indices [B]"),
    tp::cpp::config_key("num_classes", TP_CFG_INT, "3", "number of classes C (must match the logits)"),
};

}  // namespace

std::unique_ptr<Metric> make_accuracy(const tp::cpp::ConfigReader& cfg) {
  const int64_t top_k = cfg.get_int("top_k");
  if (top_k < 1 || top_k > kMaxTopK)
    throw tp::cpp::Failure(TP_ERR_CONFIG, std::string(kAccuracyId) + ": top_k must be in [1, " +
                                              std::to_string(kMaxTopK) + "], got " + std::to_string(top_k));
  return std::make_unique<Accuracy>(cfg.get_string("output"), cfg.get_string("target"), top_k);
}

std::unique_ptr<Metric> make_f1(const tp::cpp::ConfigReader& cfg) {
  const int64_t num_classes = cfg.get_int("num_classes");
  if (num_classes < 1)
    throw tp::cpp::Failure(TP_ERR_CONFIG, std::string(kF1Id) + ": num_classes must be positive, got " +
                                              std::to_string(num_classes));
  return std::make_unique<F1>(cfg.get_string("output"), cfg.get_string("target"), num_classes);
}

const tp_descriptor_t kAccuracyDescriptor = tp::cpp::metric_descriptor(
    kAccuracyId, "1.0.0", "top-k accuracy of logits against class labels; value 'accuracy' or 'top<k>_accuracy'",
    kAccuracyKeys);
const tp_descriptor_t kF1Descriptor =
    tp::cpp::metric_descriptor(kF1Id, "1.0.0", "macro F1 of the argmax prediction; value 'f1'", kF1Keys);

}  // namespace tp::metrics
