// org.torchhost.iou and org.torchhost.mae: metrics over dense outputs (masks, regressions).
#include <c10/util/StringUtil.h>
#include <ATen/ops/zeros.h>

#include "metric.h"

namespace tp::metrics {
namespace {

constexpr const char* kIouId = "org.torchhost.iou";
constexpr const char* kMaeId = "org.torchhost.mae";

at::Tensor zero(at::ScalarType dtype) { return at::zeros(at::IntArrayRef{}, at::TensorOptions(dtype)); }

/// Dataset-level binary-mask IoU and Dice: prediction = sigmoid(logit) > threshold, target =
/// mask > 0.5. State (summed over every pixel seen): intersection |P∩T|, union |P∪T|,
/// size_sum |P|+|T| (float64) and pixels (int64). IoU = ΣI / ΣU, Dice = 2ΣI / Σ(|P|+|T|).
class Iou : public Metric {
 public:
  Iou(std::string output, std::string target, double threshold)
      : output_(std::move(output)), target_(std::move(target)), threshold_(threshold) {}

  std::vector<StateSlot> state() override {
    return {{"intersection", &intersection_}, {"union", &union_}, {"size_sum", &size_sum_}, {"pixels", &pixels_}};
  }

  void update(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) override {
    const at::Tensor& logits = outputs.get(output_);
    const at::Tensor& mask = targets.get(target_);
    // [B, 1, H, W] logits against [B, H, W] masks is the common pairing: accept equal batch
    // and element counts rather than identical shapes.
    require_input(logits.dim() >= 1 && mask.dim() >= 1 && logits.size(0) == mask.size(0) &&
                      logits.numel() == mask.numel(),
                  kIouId,
                  "mask logits '" + output_ + "' " + c10::str(logits.sizes()) + " and mask '" + target_ + "' " +
                      c10::str(mask.sizes()) + " must hold the same pixels");
    const at::Tensor predicted = logits.sigmoid().gt(threshold_).reshape({-1});
    const at::Tensor truth = (mask.is_floating_point() ? mask.gt(0.5) : mask.ne(0)).reshape({-1});
    const at::Tensor intersection = predicted.logical_and(truth).sum();
    intersection_.add_(intersection);
    union_.add_(predicted.logical_or(truth).sum());
    size_sum_.add_(predicted.sum().add(truth.sum()));
    pixels_.add_(mask.numel());
  }

  std::vector<tp_scalar_t> compute() override {
    if (read_scalar(pixels_) == 0) return {{"iou", kNaN}, {"dice", kNaN}};
    const double intersection = read_scalar(intersection_);
    const double uni = read_scalar(union_);
    const double sizes = read_scalar(size_sum_);
    // Both masks empty everywhere: the prediction is exactly right.
    return {{"iou", uni > 0 ? intersection / uni : 1.0}, {"dice", sizes > 0 ? 2.0 * intersection / sizes : 1.0}};
  }

 private:
  std::string output_;
  std::string target_;
  double threshold_;
  at::Tensor intersection_ = zero(at::kDouble);
  at::Tensor union_ = zero(at::kDouble);
  at::Tensor size_sum_ = zero(at::kDouble);
  at::Tensor pixels_ = zero(at::kLong);
};

/// Mean absolute error over every element seen. State: abs_error_sum (float64), count (int64).
class Mae : public Metric {
 public:
  Mae(std::string output, std::string target) : output_(std::move(output)), target_(std::move(target)) {}

  std::vector<StateSlot> state() override { return {{"abs_error_sum", &abs_error_sum_}, {"count", &count_}}; }

  void update(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) override {
    const at::Tensor& output = outputs.get(output_);
    const at::Tensor& target = targets.get(target_);
    require_input(output.sizes() == target.sizes(), kMaeId,
                  "output '" + output_ + "' " + c10::str(output.sizes()) + " and target '" + target_ + "' " +
                      c10::str(target.sizes()) + " must have the same shape");
    // Accumulate in float64 so a long evaluation does not lose small errors to fp32 rounding.
    abs_error_sum_.add_(output.to(at::kDouble).sub(target.to(at::kDouble)).abs().sum());
    count_.add_(output.numel());
  }

  std::vector<tp_scalar_t> compute() override {
    const double count = read_scalar(count_);
    return {{"mae", count > 0 ? read_scalar(abs_error_sum_) / count : kNaN}};
  }

 private:
  std::string output_;
  std::string target_;
  at::Tensor abs_error_sum_ = zero(at::kDouble);
  at::Tensor count_ = zero(at::kLong);
};

const tp_config_key_t kIouKeys[] = {
    tp::cpp::config_key("output", TP_CFG_STRING, "\"mask_logits\"", "model output with per-pixel logits [B, ...]"),
    tp::cpp::config_key("target", TP_CFG_STRING, "\"mask\"", "batch field with the binary mask (same pixels)"),
    tp::cpp::config_key("threshold", TP_CFG_FLOAT, "0.5", "a pixel is predicted when sigmoid(logit) > threshold"),
};
const tp_config_key_t kMaeKeys[] = {
    tp::cpp::config_key("output", TP_CFG_STRING, "\"bbox\"", "model output [B, ...]"),
    tp::cpp::config_key("target", TP_CFG_STRING, "\"bbox\"", "batch field of the same shape"),
};

}  // namespace

std::unique_ptr<Metric> make_iou(const tp::cpp::ConfigReader& cfg) {
  const double threshold = cfg.get_float("threshold");
  if (!(threshold > 0.0 && threshold < 1.0))
    throw tp::cpp::Failure(TP_ERR_CONFIG, std::string(kIouId) + ": threshold must be in (0, 1), got " +
                                              std::to_string(threshold));
  return std::make_unique<Iou>(cfg.get_string("output"), cfg.get_string("target"), threshold);
}

std::unique_ptr<Metric> make_mae(const tp::cpp::ConfigReader& cfg) {
  return std::make_unique<Mae>(cfg.get_string("output"), cfg.get_string("target"));
}

const tp_descriptor_t kIouDescriptor = tp::cpp::metric_descriptor(
    kIouId, "1.0.0", "binary-mask IoU and Dice over all pixels seen; values 'iou' and 'dice'", kIouKeys);
const tp_descriptor_t kMaeDescriptor =
    tp::cpp::metric_descriptor(kMaeId, "1.0.0", "mean absolute error over all elements seen; value 'mae'", kMaeKeys);

}  // namespace tp::metrics
