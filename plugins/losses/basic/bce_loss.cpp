// org.torchhost.bce_with_logits: binary cross entropy on logits [B, L], each of the L labels its
// own yes or no. Multi-label tagging (multi-hot targets), and timm's BinaryCrossEntropy on class
// indices (ResNet strikes back's A1/A2 recipes train ImageNet with it). On dense logits
// [B, C, H, W] every pixel of every channel is one: smp's binary segmentation (one logit a pixel,
// a 0/1 mask) and multi-label masks, with ignore_index pixels left out of the mean.
#include <c10/util/StringUtil.h>
#include <ATen/core/Reduction.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/binary_cross_entropy_with_logits.h>
#include <ATen/ops/zeros.h>

#include <cmath>
#include <string>
#include <vector>

#include "loss_terms.h"

namespace tp::losses {

using tp::cpp::Failure;

namespace {

constexpr const char* kBceId = "org.torchhost.bce_with_logits";

/// PyTorch's BCEWithLogitsLoss(pos_weight=...) with reduction "mean": the sum of the B x L
/// element losses and their count, so the host's division gives the mean over every element
/// (accumulation and ranks included). Computed in float32 at least: a 16-bit logit's loss near 0
/// would round away, and autocast runs this op in float32 too.
class BinaryCrossEntropy : public Loss {
 public:
  BinaryCrossEntropy(std::string output, std::string target, double smoothing, double threshold,
                     std::vector<double> pos_weight, int64_t ignore_index)
      : output_(std::move(output)), target_(std::move(target)), smoothing_(smoothing), threshold_(threshold),
        pos_weight_(std::move(pos_weight)), ignore_index_(ignore_index) {}

  tp::cpp::LossSum forward(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) override {
    const at::Tensor& out = outputs.get(output_);
    const at::Tensor& tgt = targets.get(target_);
    if (out.dim() >= 3) return dense(out, tgt);
    if (out.dim() != 2)
      throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(kBceId) + ": output '" + output_ + "' " + c10::str(out.sizes()) +
                                                 ": expected logits [B, L], one per label, or [B, C, H, W], one per "
                                                 "pixel and channel");
    const int64_t labels = out.size(1);
    const at::ScalarType dtype = c10::promoteTypes(out.scalar_type(), at::kFloat);
    const at::Tensor logits = out.to(dtype);
    const at::Tensor t = smoothed(soft_targets(tgt, out.size(0), labels, out.device(), dtype), labels, dtype);
    at::Tensor sum = at::binary_cross_entropy_with_logits(logits, t, {}, pos_weight(logits), at::Reduction::Sum);
    return {std::move(sum), count_tensor(logits.numel(), out.device())};
  }

 private:
  /// timm's smoothing (on = 1 - s + s/L, off = s/L), then its target_threshold
  /// (--bce-target-thresh, the ResNet-strikes-back recipes): a target above it is 1, else 0, so
  /// Mixup's blended targets become multi-hot.
  at::Tensor smoothed(at::Tensor t, int64_t labels, at::ScalarType dtype) const {
    if (smoothing_ > 0) t = t * (1.0 - smoothing_) + smoothing_ / static_cast<double>(labels);
    if (threshold_ >= 0) t = t.gt(threshold_).to(dtype);
    return t;
  }

  /// Logits [B, C, d...]: BCEWithLogitsLoss(reduction="none") per element, summed over the
  /// elements whose mask pixel is not ignore_index and counted (on the device, no sync).
  tp::cpp::LossSum dense(const at::Tensor& out, const at::Tensor& tgt) {
    const at::ScalarType dtype = c10::promoteTypes(out.scalar_type(), at::kFloat);
    const at::Tensor logits = out.to(dtype);
    const BinaryTargets b = binary_targets(logits, tgt, ignore_index_, dtype, kBceId, output_, target_, ids_.due(tgt));
    const int64_t channels = logits.size(1);
    // pos_weight per channel, broadcast over the pixels: [C, 1, ..., 1].
    at::Tensor weight = pos_weight(logits);
    if (weight.defined()) {
      std::vector<int64_t> shape(static_cast<std::size_t>(logits.dim() - 1), 1);
      shape[0] = channels;
      weight = weight.view(shape);
    }
    const at::Tensor per = at::binary_cross_entropy_with_logits(logits, smoothed(b.target, channels, dtype), {}, weight,
                                                                at::Reduction::None);
    if (!b.valid.defined()) return {per.sum(), count_tensor(per.numel(), out.device())};
    const at::Tensor valid = b.valid.expand_as(per);
    // A batch with every pixel ignored gives sum 0 and count 0, as cross_entropy's.
    return {per.masked_fill(valid.logical_not(), 0).sum(), valid.sum()};
  }

  /// Multi-hot targets [B, L] (float, or integer 0/1) as `dtype`, or class indices [B] one-hot.
  at::Tensor soft_targets(const at::Tensor& target, int64_t batch, int64_t labels, const at::Device& device,
                          at::ScalarType dtype) {
    if (target.dim() == 2 && target.size(0) == batch && target.size(1) == labels) return target.to(dtype);
    if (target.dim() != 1 || target.size(0) != batch || target.is_floating_point())
      throw Failure(TP_ERR_INVALID_ARGUMENT,
                    std::string(kBceId) + ": target '" + target_ + "' " + c10::str(target.sizes()) + " for output '" +
                        output_ + "' [" + std::to_string(batch) + ", " + std::to_string(labels) +
                        "]: expected multi-hot labels [B, L] (float or integer 0/1) or class indices [B] (integer)");
    const at::Tensor ids = target.to(at::kLong);
    // A class id outside [0, L) would write past the one-hot row (a device assert on CUDA): read
    // once on a device, every batch on the CPU, as cross_entropy does.
    if (ids_.due(ids) && ids.numel() > 0) {
      const auto [low, high] = at::aminmax(ids);
      const int64_t least = low.item<int64_t>(), most = high.item<int64_t>();
      if (least < 0 || most >= labels)
        throw Failure(TP_ERR_INVALID_ARGUMENT,
                      std::string(kBceId) + ": target '" + target_ + "' holds the class id " +
                          std::to_string(least < 0 ? least : most) + ", outside [0, " + std::to_string(labels) +
                          ") of output '" + output_ + "'. Give the model num_classes above it.");
    }
    return at::zeros({batch, labels}, at::TensorOptions().dtype(dtype).device(device)).scatter_(1, ids.unsqueeze(1), 1.0);
  }

  /// pos_weight on the logits' device and dtype (DeviceWeights); undefined without.
  const at::Tensor& pos_weight(const at::Tensor& logits) {
    if (pos_weight_.empty()) return pos_weight_.like(logits);
    if (logits.size(1) != static_cast<int64_t>(pos_weight_.size()))
      throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(kBceId) + ": pos_weight has " +
                                                 std::to_string(pos_weight_.size()) + " values but the output '" +
                                                 output_ + "' has " + std::to_string(logits.size(1)) +
                                                 " labels (dimension 1). Give one weight per label, in label order.");
    return pos_weight_.like(logits);
  }

  std::string output_;
  std::string target_;
  double smoothing_;
  double threshold_; ///< < 0: off
  DeviceWeights pos_weight_;
  int64_t ignore_index_; ///< dense logits' integer masks only
  ClassIdCheck ids_;
};

}  // namespace

std::unique_ptr<Loss> make_bce_with_logits(const tp::cpp::ConfigReader& cfg) {
  const double smoothing = cfg.get_float("label_smoothing");
  if (!(smoothing >= 0.0 && smoothing <= 1.0))
    throw Failure(TP_ERR_CONFIG, std::string(kBceId) + ": label_smoothing must be in [0, 1], got " + std::to_string(smoothing));
  const double threshold = cfg.get_float("target_threshold");
  if (!(threshold < 1.0) || std::isnan(threshold))
    throw Failure(TP_ERR_CONFIG, std::string(kBceId) + ": target_threshold must be below 1 (a negative value turns it "
                                                       "off), got " + std::to_string(threshold));
  std::vector<double> pos_weight = cfg.get_float_array("pos_weight");
  for (const double w : pos_weight)
    if (!(w >= 0.0 && std::isfinite(w)))
      throw Failure(TP_ERR_CONFIG, std::string(kBceId) + ": pos_weight must be finite and >= 0, got " + std::to_string(w));
  return std::make_unique<BinaryCrossEntropy>(cfg.get_string("output"), cfg.get_string("target"), smoothing,
                                              threshold, std::move(pos_weight), cfg.get_int("ignore_index"));
}

namespace {

const tp_config_key_t kBceKeys[] = {
    tp::cpp::config_key("output", TP_CFG_STRING, "\"logits\"",
                        "model output holding logits [B, L], one per label, or [B, C, H, W], one per pixel and channel"),
    tp::cpp::config_key("target", TP_CFG_STRING, "\"label\"",
                        "batch field: multi-hot labels [B, L] (float or integer 0/1), or class indices [B] (one-hot); "
                        "for [B, C, H, W] logits a mask [B, H, W] (C = 1: 0/1; C > 1: class ids, one-hot) or targets "
                        "of the logits' shape"),
    tp::cpp::config_key("label_smoothing", TP_CFG_FLOAT, "0.0",
                        "in [0, 1]: targets t * (1 - s) + s / L, timm's BinaryCrossEntropy smoothing"),
    tp::cpp::config_key("target_threshold", TP_CFG_FLOAT, "-1.0",
                        "after label_smoothing, targets above it become 1, the rest 0 (timm's --bce-target-thresh); "
                        "< 0 = off"),
    tp::cpp::config_key("pos_weight", TP_CFG_FLOAT_ARRAY, "[]",
                        "one weight per label for its positive term, as BCEWithLogitsLoss(pos_weight=...); [] = 1"),
    tp::cpp::config_key("ignore_index", TP_CFG_INT, "-100",
                        "[B, C, H, W] logits: integer mask value whose pixels are neither summed nor counted (255 "
                        "for void)"),
};
const tp_example_input_t kMultiHotExample[] = {{sizeof(tp_example_input_t), "label", TP_DTYPE_FLOAT32, 1, {3}, 0}};

}  // namespace

const tp_descriptor_t kBceDescriptor = tp::cpp::loss_descriptor(
    kBceId, "1.1.0",
    "binary cross entropy on logits [B, L] or [B, C, H, W]; sum over every element not ignored, count of them", kBceKeys,
    kMultiHotExample);

}  // namespace tp::losses
