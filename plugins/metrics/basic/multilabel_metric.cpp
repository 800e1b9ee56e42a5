// org.torchhost.multilabel: multi-label classification (logits [B, L], multi-hot targets [B, L]),
// torchmetrics' MultilabelAccuracy, MultilabelF1Score and MultilabelAveragePrecision with
// average = "macro". The counts add up across batches and ranks; average precision ranks every
// sample's score of a label, so the scores and targets are rows gathered across ranks (ABI 1.7).
#include <c10/util/StringUtil.h>
#include <ATen/ATen.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "metric.h"
#include "tp/cpp/gathered_rows.h"

namespace tp::metrics {
namespace {

constexpr const char* kMultilabelId = "org.torchhost.multilabel";

/// Average precision of one label as torchmetrics computes it (binary_clf_curve): scores sorted
/// descending, one point per distinct score, AP = sum over the points of (recall step) x
/// precision; 0 for a label without a positive (torchmetrics and scikit-learn alike).
double average_precision(const at::Tensor& scores, const at::Tensor& truth) {
  const at::Tensor order = std::get<1>(scores.sort(/*stable=*/true, 0, /*descending=*/true));
  const at::Tensor s = scores.index_select(0, order), t = truth.index_select(0, order);
  const double positives = t.sum().item<double>();
  if (positives == 0) return 0.0;
  const at::Tensor tps = t.cumsum(0);
  // The last index of each run of one score: where the next score differs, and the end.
  const at::Tensor last = at::cat({s.slice(0, 1).ne(s.slice(0, 0, -1)), at::ones({1}, at::kBool)}).nonzero().flatten();
  const at::Tensor hits = tps.index_select(0, last);
  const at::Tensor seen = (last + 1).to(at::kDouble);
  const at::Tensor precision = hits / seen, recall = hits / positives;
  const at::Tensor steps = at::cat({recall.slice(0, 0, 1), recall.diff()});
  return (steps * precision).sum().item<double>();
}

class Multilabel {
 public:
  Multilabel(std::string output, std::string target, int64_t labels, double threshold)
      : output_(std::move(output)), target_(std::move(target)), labels_(labels), threshold_(threshold),
        tp_(at::zeros({labels}, at::kLong)), fp_(at::zeros({labels}, at::kLong)), fn_(at::zeros({labels}, at::kLong)),
        tn_(at::zeros({labels}, at::kLong)), scores_({labels}, at::kFloat), truth_({labels}, at::kFloat) {}

  std::vector<StateSlot> state() { return {{"tp", &tp_}, {"fp", &fp_}, {"fn", &fn_}, {"tn", &tn_}}; }
  std::vector<tp::cpp::GatheredSlot> gathered_state() { return {{"scores", &scores_}, {"targets", &truth_}}; }

  void update(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) {
    const at::Tensor& logits = outputs.get(output_);
    const at::Tensor& target = targets.get(target_);
    require_input(logits.dim() == 2 && logits.size(1) == labels_ && target.sizes() == logits.sizes(), kMultilabelId,
                  "expected logits '" + output_ + "' and multi-hot targets '" + target_ + "' both [B, " +
                      std::to_string(labels_) + "] (num_labels), got " + c10::str(logits.sizes()) + " and " +
                      c10::str(target.sizes()));
    // The outputs are logits: their sigmoid is the score (torchmetrics applies it to values
    // outside [0, 1]), in float32 as torchmetrics keeps a float32 model's.
    const at::Tensor probability = logits.to(at::kFloat).sigmoid();
    const at::Tensor predicted = probability.gt(threshold_), truth = target.ne(0);
    tp_.add_(predicted.logical_and(truth).sum(0));
    fp_.add_(predicted.logical_and(truth.logical_not()).sum(0));
    fn_.add_(predicted.logical_not().logical_and(truth).sum(0));
    tn_.add_(predicted.logical_not().logical_and(truth.logical_not()).sum(0));
    scores_.append(probability, std::string(kMultilabelId) + " scores");
    truth_.append(truth.to(at::kFloat), std::string(kMultilabelId) + " targets");
  }

  std::vector<tp_scalar_t> compute() {
    const at::Tensor tp = tp_.cpu().to(at::kDouble), fp = fp_.cpu().to(at::kDouble), fn = fn_.cpu().to(at::kDouble),
                     tn = tn_.cpu().to(at::kDouble);
    const at::Tensor total = tp + fp + fn + tn;
    if (total.sum().item<double>() == 0) return {{"label_accuracy", kNaN}, {"label_f1", kNaN}, {"map", kNaN}};
    const double accuracy = ((tp + tn) / total).mean().item<double>();
    // A label never present nor predicted scores 0, as torchmetrics' multilabel macro F1 counts it.
    const at::Tensor denominator = 2 * tp + fp + fn;
    const double f1 = at::where(denominator.gt(0), 2 * tp / denominator.clamp_min(1), at::zeros_like(tp)).mean().item<double>();
    const at::Tensor scores = scores_.rows().cpu().to(at::kDouble), truth = truth_.rows().cpu();
    double sum = 0.0;
    for (int64_t label = 0; label < labels_; ++label)
      sum += average_precision(scores.select(1, label).contiguous(), truth.select(1, label).contiguous());
    return {{"label_accuracy", accuracy}, {"label_f1", f1}, {"map", sum / static_cast<double>(labels_)}};
  }

 private:
  std::string output_;
  std::string target_;
  int64_t labels_;
  double threshold_;
  at::Tensor tp_, fp_, fn_, tn_;
  tp::cpp::GatheredRows scores_;
  tp::cpp::GatheredRows truth_;
};

const tp_config_key_t kMultilabelKeys[] = {
    tp::cpp::config_key("output", TP_CFG_STRING, "\"logits\"", "model output holding logits [B, L], one per label"),
    tp::cpp::config_key("target", TP_CFG_STRING, "\"label\"", "batch field with multi-hot labels [B, L] (nonzero = present)"),
    tp::cpp::config_key("num_labels", TP_CFG_INT, "3", "number of labels L (must match the logits)"),
    tp::cpp::config_key("threshold", TP_CFG_FLOAT, "0.5", "a label is predicted when its sigmoid is above this"),
};

std::shared_ptr<Multilabel> make_multilabel(const tp::cpp::ConfigReader& cfg) {
  const int64_t labels = cfg.get_int("num_labels");
  if (labels < 1)
    throw tp::cpp::Failure(TP_ERR_CONFIG, std::string(kMultilabelId) + ": num_labels must be positive, got " +
                                              std::to_string(labels));
  const double threshold = cfg.get_float("threshold");
  if (!(threshold >= 0.0 && threshold <= 1.0))
    throw tp::cpp::Failure(TP_ERR_CONFIG, std::string(kMultilabelId) + ": threshold must be in [0, 1], got " +
                                              std::to_string(threshold));
  return std::make_shared<Multilabel>(cfg.get_string("output"), cfg.get_string("target"), labels, threshold);
}

}  // namespace

const tp_descriptor_t kMultilabelDescriptor = tp::cpp::metric_descriptor(
    kMultilabelId, "1.0.0",
    "multi-label macro accuracy, F1 and mean average precision (torchmetrics' Multilabel*); values 'label_accuracy', "
    "'label_f1', 'map'",
    kMultilabelKeys);
tp::cpp::Component multilabel_component() {
  return tp::cpp::metric_component<Multilabel, kMultilabelDescriptor, &make_multilabel>();
}

}  // namespace tp::metrics
