// org.torchhost.dice: segmentation_models_pytorch 0.6's DiceLoss (modes binary, multiclass and
// multilabel), the loss smp and mmseg users add to cross entropy. Dice is a ratio over the whole
// batch, not a mean of per-item terms: the component returns the batch's value once per sample.
#include <c10/util/StringUtil.h>
#include <ATen/ops/log_sigmoid.h>
#include <ATen/ops/one_hot.h>
#include <ATen/ops/tensor.h>

#include <cmath>
#include <string>
#include <vector>

#include "loss_terms.h"

namespace tp::losses {

using tp::cpp::Failure;

namespace {

constexpr const char* kDiceId = "org.torchhost.dice";

/// smp's soft_tversky_score with alpha = beta = 0.5 (its soft_dice_score since 0.5) over dims
/// (0, 2) of [B, C, N]: the intersection from the L1 distance, (Σp + Σt − Σ|p − t|) / 2, as smp
/// writes it, so soft targets get smp's value too.
at::Tensor soft_dice_score(const at::Tensor& pred, const at::Tensor& target, double smooth, double eps) {
  const std::vector<int64_t> dims{0, 2};
  const at::Tensor pred_sum = pred.sum(dims), target_sum = target.sum(dims);
  const at::Tensor difference = (pred - target).abs().sum(dims);
  const at::Tensor intersection = (pred_sum + target_sum - difference) / 2;
  const at::Tensor fp = pred_sum - intersection, fn = target_sum - intersection;
  return (intersection + smooth) / (intersection + 0.5 * fp + 0.5 * fn + smooth).clamp_min(eps);
}

}  // namespace

at::Tensor dice_loss(const at::Tensor& output, const at::Tensor& target, const DiceOptions& o,
                     const std::string& component, const std::string& output_name, const std::string& target_name,
                     bool check_ids) {
  using Mode = DiceOptions::Mode;
  if (output.dim() < 2 || (o.mode == Mode::kBinary && output.size(1) != 1))
    throw Failure(TP_ERR_INVALID_ARGUMENT,
                  component + ": output '" + output_name + "' " + c10::str(output.sizes()) + ": expected " +
                      (o.mode == Mode::kBinary ? "[B, 1, H, W], one logit a pixel (mode \"binary\")"
                                               : "[B, C, H, W], one logit (or probability) per class and pixel"));
  const at::ScalarType dtype = c10::promoteTypes(output.scalar_type(), at::kFloat);
  at::Tensor pred = output.to(dtype);
  if (o.from_logits) pred = o.mode == Mode::kMulticlass ? pred.log_softmax(1).exp() : at::log_sigmoid(pred).exp();
  const int64_t batch = pred.size(0), classes = pred.size(1);
  // binary_targets reads the masks as smp does (a binary 0/1 mask, class ids one-hot, a mask per
  // channel) and refuses what smp would misread; ignore_index pixels are zeroed in both tensors.
  const BinaryTargets b = binary_targets(pred, target, o.ignore_index, dtype, component, output_name, target_name,
                                         check_ids);
  at::Tensor truth = b.target;
  if (b.valid.defined()) {
    const at::Tensor keep = b.valid.to(dtype);
    pred = pred * keep;
    truth = truth * keep;
  }
  pred = pred.reshape({batch, classes, -1});
  truth = truth.reshape({batch, classes, -1});
  const at::Tensor scores = soft_dice_score(pred, truth, o.smooth, o.eps);
  at::Tensor loss = o.log_loss ? -scores.clamp_min(o.eps).log() : 1.0 - scores;
  // smp: a class with no true pixel in the batch adds 0 (its Dice is undefined), still averaged.
  loss = loss * truth.sum(std::vector<int64_t>{0, 2}).gt(0).to(dtype);
  if (!o.classes.empty()) {
    for (const int64_t c : o.classes)
      if (c >= classes)
        throw Failure(TP_ERR_INVALID_ARGUMENT, component + ": classes lists " + std::to_string(c) + " but output '" +
                                                   output_name + "' has " + std::to_string(classes) + " classes");
    loss = loss.index_select(0, at::tensor(o.classes, at::TensorOptions().dtype(at::kLong)).to(loss.device()));
  }
  return loss.mean();
}

namespace {

/// One DiceLoss over one (output, target) pair. Item: a sample; the sum is the batch's loss times
/// its size, so one batch's sum / count is smp's value, and an accumulation window's is the mean
/// of its micro-batches' values weighted by their sizes.
class Dice : public Loss {
 public:
  Dice(std::string output, std::string target, DiceOptions options)
      : output_(std::move(output)), target_(std::move(target)), options_(std::move(options)) {}

  tp::cpp::LossSum forward(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) override {
    const at::Tensor& out = outputs.get(output_);
    const at::Tensor& tgt = targets.get(target_);
    const at::Tensor value = dice_loss(out, tgt, options_, kDiceId, output_, target_, ids_.due(tgt));
    return {value * static_cast<double>(out.size(0)), count_tensor(out.size(0), out.device())};
  }

 private:
  std::string output_;
  std::string target_;
  DiceOptions options_;
  ClassIdCheck ids_;
};

}  // namespace

std::unique_ptr<Loss> make_dice(const tp::cpp::ConfigReader& cfg) {
  const auto fail = [](const std::string& message) { return Failure(TP_ERR_CONFIG, std::string(kDiceId) + ": " + message); };
  DiceOptions o;
  const std::string mode = cfg.get_string("mode");
  if (mode == "binary") o.mode = DiceOptions::Mode::kBinary;
  else if (mode == "multiclass") o.mode = DiceOptions::Mode::kMulticlass;
  else if (mode == "multilabel") o.mode = DiceOptions::Mode::kMultilabel;
  else throw fail("mode must be \"binary\", \"multiclass\" or \"multilabel\", got \"" + mode + "\"");
  o.from_logits = cfg.get_bool("from_logits");
  o.smooth = cfg.get_float("smooth");
  o.eps = cfg.get_float("eps");
  o.ignore_index = cfg.get_int("ignore_index");
  o.log_loss = cfg.get_bool("log_loss");
  if (!(o.smooth >= 0.0 && std::isfinite(o.smooth))) throw fail("smooth must be finite and >= 0, got " + std::to_string(o.smooth));
  if (!(o.eps > 0.0 && std::isfinite(o.eps))) throw fail("eps must be finite and > 0, got " + std::to_string(o.eps));
  o.classes = cfg.get_int_array("classes");
  for (const int64_t c : o.classes)
    if (c < 0) throw fail("classes holds " + std::to_string(c) + "; class ids are >= 0");
  if (!o.classes.empty() && o.mode == DiceOptions::Mode::kBinary)
    throw fail("classes selects among several classes; mode \"binary\" has one (smp refuses it too)");
  return std::make_unique<Dice>(cfg.get_string("output"), cfg.get_string("target"), std::move(o));
}

namespace {

const tp_config_key_t kDiceKeys[] = {
    tp::cpp::config_key("output", TP_CFG_STRING, "\"logits\"", "model output: logits [B, C, H, W] ([B, 1, H, W] for binary)"),
    tp::cpp::config_key("target", TP_CFG_STRING, "\"mask\"",
                        "batch field: mask [B, H, W] (binary: 0/1; multiclass: class ids) or, multilabel, [B, C, H, W]"),
    tp::cpp::config_key("mode", TP_CFG_STRING, "\"multiclass\"",
                        "smp's mode: \"binary\" (sigmoid, one channel), \"multiclass\" (softmax over C), \"multilabel\" "
                        "(sigmoid per channel)"),
    tp::cpp::config_key("from_logits", TP_CFG_BOOL, "true", "the output holds logits (false: probabilities)"),
    tp::cpp::config_key("smooth", TP_CFG_FLOAT, "0.0", "added to the Dice ratio's numerator and denominator (>= 0)"),
    tp::cpp::config_key("eps", TP_CFG_FLOAT, "1e-7", "least denominator (> 0)"),
    tp::cpp::config_key("ignore_index", TP_CFG_INT, "-100", "integer mask value whose pixels are left out (255 for void)"),
    tp::cpp::config_key("log_loss", TP_CFG_BOOL, "false", "-log(Dice) instead of 1 - Dice"),
    tp::cpp::config_key("classes", TP_CFG_INT_ARRAY, "[]", "the classes averaged (not binary); [] = all"),
};
const tp_example_input_t kDiceMaskExample[] = {{sizeof(tp_example_input_t), "mask", TP_DTYPE_INT64, 2, {8, 8}, 3}};

}  // namespace

const tp_descriptor_t kDiceDescriptor = tp::cpp::loss_descriptor(
    kDiceId, "1.0.0", "smp's DiceLoss over the batch (binary, multiclass, multilabel); sum = value x B, count = B",
    kDiceKeys, kDiceMaskExample);

}  // namespace tp::losses
