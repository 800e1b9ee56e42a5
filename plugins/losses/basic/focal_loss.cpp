// org.torchhost.focal: torchvision.ops.sigmoid_focal_loss (RetinaNet's focal loss) with
// reduction "mean", over logits [B, L] or dense logits [B, C, H, W]: binary and multi-label
// masks, and integer class-id masks one-hot over C, which is smp's FocalLoss(mode="multiclass")
// (one sigmoid per class, not a softmax; the mean over classes of each class's mean over the
// pixels, i.e. the mean over pixels x classes).
#include <ATen/core/Reduction.h>
#include <ATen/ops/binary_cross_entropy_with_logits.h>

#include <cmath>
#include <string>

#include "loss_terms.h"

namespace tp::losses {

using tp::cpp::Failure;

namespace {

constexpr const char* kFocalId = "org.torchhost.focal";

/// Item: an element (a label of a sample, or a pixel of a channel) not ignored; sum / count is
/// sigmoid_focal_loss(..., reduction="mean") over them.
class Focal : public Loss {
 public:
  Focal(std::string output, std::string target, double alpha, double gamma, int64_t ignore_index)
      : output_(std::move(output)), target_(std::move(target)), alpha_(alpha), gamma_(gamma),
        ignore_index_(ignore_index) {}

  tp::cpp::LossSum forward(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) override {
    const at::Tensor& out = outputs.get(output_);
    const at::Tensor& tgt = targets.get(target_);
    // float32 at least, as bce_with_logits: a 16-bit (1 - p_t)^gamma of a confident pixel rounds to 0.
    const at::ScalarType dtype = c10::promoteTypes(out.scalar_type(), at::kFloat);
    const at::Tensor x = out.to(dtype);
    const BinaryTargets b = binary_targets(x, tgt, ignore_index_, dtype, kFocalId, output_, target_, ids_.due(tgt));
    const at::Tensor& t = b.target;
    // torchvision's operations, in its order.
    const at::Tensor p = x.sigmoid();
    const at::Tensor ce = at::binary_cross_entropy_with_logits(x, t, {}, {}, at::Reduction::None);
    const at::Tensor p_t = p * t + (1 - p) * (1 - t);
    at::Tensor loss = ce * (1 - p_t).pow(gamma_);
    if (alpha_ >= 0) loss = (alpha_ * t + (1 - alpha_) * (1 - t)) * loss;
    if (!b.valid.defined()) return {loss.sum(), count_tensor(loss.numel(), out.device())};
    const at::Tensor valid = b.valid.expand_as(loss);
    // Every element ignored: sum 0 and count 0, as cross_entropy's (the mean would be NaN).
    return {loss.masked_fill(valid.logical_not(), 0).sum(), valid.sum()};
  }

 private:
  std::string output_;
  std::string target_;
  double alpha_;  ///< < 0: no weighting (torchvision's alpha = -1, smp's alpha = None)
  double gamma_;
  int64_t ignore_index_;
  ClassIdCheck ids_;
};

}  // namespace

std::unique_ptr<Loss> make_focal(const tp::cpp::ConfigReader& cfg) {
  const double alpha = cfg.get_float("alpha");
  const double gamma = cfg.get_float("gamma");
  if (!(alpha <= 1.0) || std::isnan(alpha))
    throw Failure(TP_ERR_CONFIG, std::string(kFocalId) + ": alpha must be in [0, 1] (a negative value turns the "
                                                         "weighting off), got " + std::to_string(alpha));
  if (!(gamma >= 0.0 && std::isfinite(gamma)))
    throw Failure(TP_ERR_CONFIG, std::string(kFocalId) + ": gamma must be finite and >= 0, got " + std::to_string(gamma));
  return std::make_unique<Focal>(cfg.get_string("output"), cfg.get_string("target"), alpha, gamma,
                                 cfg.get_int("ignore_index"));
}

namespace {

const tp_config_key_t kFocalKeys[] = {
    tp::cpp::config_key("output", TP_CFG_STRING, "\"logits\"", "model output: logits [B, L] or [B, C, H, W]"),
    tp::cpp::config_key("target", TP_CFG_STRING, "\"mask\"",
                        "batch field: targets of the logits' shape (0/1), or a mask [B, H, W] (C = 1: 0/1; C > 1: "
                        "class ids, one-hot)"),
    tp::cpp::config_key("alpha", TP_CFG_FLOAT, "0.25",
                        "weight of the positive terms, 1 - alpha of the negative ones; < 0 = off (torchvision -1, smp None)"),
    tp::cpp::config_key("gamma", TP_CFG_FLOAT, "2.0", "focusing exponent of (1 - p_t), >= 0"),
    tp::cpp::config_key("ignore_index", TP_CFG_INT, "-100", "integer mask value whose pixels are left out (255 for void)"),
};
const tp_example_input_t kFocalMaskExample[] = {{sizeof(tp_example_input_t), "mask", TP_DTYPE_INT64, 2, {8, 8}, 2}};

}  // namespace

const tp_descriptor_t kFocalDescriptor = tp::cpp::loss_descriptor(
    kFocalId, "1.0.0", "sigmoid focal loss (torchvision, smp); sum over the elements not ignored, count of them",
    kFocalKeys, kFocalMaskExample);

}  // namespace tp::losses
