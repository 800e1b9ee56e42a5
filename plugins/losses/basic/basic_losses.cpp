// basic_losses: the loss terms, the three single-term components and tp_entry (the C shell of
// each is tp/cpp/loss_adapter.h). weighted_sum, bce_with_logits, dice and focal have a file each.
#include <c10/core/InferenceMode.h>
#include <c10/util/StringUtil.h>
#include <ATen/core/Reduction.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/smooth_l1_loss.h>
#include <ATen/ops/tensor.h>

#include <cmath>
#include <string>
#include <vector>

#include "loss_terms.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/loss_adapter.h"
#include "tp/cpp/plugin.h"

namespace tp::losses {

using tp::cpp::Failure;

namespace {

void require_shape(bool ok, const std::string& output_name, const at::Tensor& output,
                   const std::string& target_name, const at::Tensor& target, const char* expected) {
  if (!ok)
    throw Failure(TP_ERR_INVALID_ARGUMENT, "output '" + output_name + "' " + c10::str(output.sizes()) +
                                               " and target '" + target_name + "' " +
                                               c10::str(target.sizes()) + ": expected " + expected);
}

/// "float32", "int64", ...: the dtype as PyTorch prints it, without "torch.".
std::string dtype_name(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    default: return c10::toString(dtype);
  }
}

/// Class-index targets as int64 (at::cross_entropy needs Long), their ids checked when
/// `check_ids`; probability targets unchanged.
at::Tensor ce_target(const at::Tensor& output, const at::Tensor& target, const std::string& output_name,
                     const std::string& target_name, const TermOptions& options, bool check_ids) {
  require_shape(output.dim() >= 2, output_name, output, target_name, target, "logits [B, C, ...]");
  std::vector<int64_t> expected = output.sizes().vec();
  expected.erase(expected.begin() + 1);
  const bool index_shape = target.sizes() == at::IntArrayRef(expected);
  if (target.is_floating_point()) {
    // A float label of the class-index shape: the dtype is the mistake, not the shape (a dataset
    // that stores its labels as float32 instead of int64).
    if (index_shape && target.sizes() != output.sizes())
      throw Failure(TP_ERR_INVALID_ARGUMENT,
                    "target '" + target_name + "' " + dtype_name(target.scalar_type()) + c10::str(target.sizes()) +
                        ": class indices need an integer dtype (int64). Give the dataset's field '" + target_name +
                        "' as int64, or give probability targets of the logits' shape " + c10::str(output.sizes()) +
                        " (output '" + output_name + "')");
    require_shape(target.sizes() == output.sizes(), output_name, output, target_name, target,
                  "probability targets of the logits' shape");
    return target;
  }
  require_shape(index_shape, output_name, output, target_name, target,
                "class indices shaped like the logits without the class dimension");
  at::Tensor ids = target.scalar_type() == at::kLong ? target : target.to(at::kLong);
  if (check_ids) check_class_ids(output, ids, options, output_name, target_name);
  return ids;
}

}  // namespace

// PyTorch's own check said only "Target 7 is out of bounds" (a trial's mask value 7 with 5
// classes): no field, no value's meaning, no way to the file.
void check_class_ids(const at::Tensor& output, const at::Tensor& ids, const TermOptions& options,
                     const std::string& output_name, const std::string& target_name) {
  if (ids.numel() == 0) return;
  const int64_t classes = output.size(1);
  // Ignored positions read as class 0, inside any class count: one reduction covers the rest.
  const auto [low, high] = at::aminmax(ids.masked_fill(ids.eq(options.ignore_index), 0));
  const int64_t least = low.item<int64_t>(), most = high.item<int64_t>();
  if (least >= 0 && most < classes) return;
  const std::string bad = std::to_string(least < 0 ? least : most), count = std::to_string(classes);
  throw Failure(TP_ERR_INVALID_ARGUMENT,
                "target '" + target_name + "' holds the class id " + bad + ", outside [0, " + count + ") of the " +
                    count + " classes of output '" + output_name + "' (its dimension 1), and not ignore_index (" +
                    std::to_string(options.ignore_index) + "): PyTorch stops on it (\"Target " + bad +
                    " is out of bounds\"). If " + bad + " marks what to leave out, set the loss's ignore_index to it; "
                    "if it is a class, give the model num_classes above it. To find the sample holding it, set the "
                    "dataset's num_classes key (segmentation_folder: data.train.num_classes = " + count +
                    "), which checks every sample as it is read and names its file and pixel.");
}

Term term_from_name(const std::string& name, const char* component) {
  if (name == "cross_entropy") return Term::kCrossEntropy;
  if (name == "mse") return Term::kMse;
  if (name == "smooth_l1") return Term::kSmoothL1;
  if (name == "dice") return Term::kDice;
  throw Failure(TP_ERR_CONFIG, std::string(component) + ": unknown loss '" + name +
                                   "' (known: cross_entropy, mse, smooth_l1, dice)");
}

const at::Tensor& DeviceWeights::like(const at::Tensor& output) {
  if (values_.empty()) return tensor_;
  if (!tensor_.defined() || tensor_.device() != output.device() || tensor_.scalar_type() != output.scalar_type()) {
    const c10::InferenceMode normal(false);
    tensor_ = at::tensor(values_, at::TensorOptions().dtype(at::kDouble)).to(output.options());
  }
  return tensor_;
}

at::Tensor count_tensor(int64_t count, const at::Device& device) {
  // A fill kernel on the device, not a host-to-device copy that could wait.
  return at::scalar_tensor(count, at::TensorOptions().dtype(at::kLong).device(device));
}

at::Tensor per_sample_sum(Term term, const at::Tensor& output, const at::Tensor& target,
                          const TermOptions& options, const std::string& output_name,
                          const std::string& target_name, bool check_ids) {
  at::Tensor per;  // per-position loss, batch dimension first
  if (term == Term::kCrossEntropy) {
    per = at::cross_entropy_loss(output, ce_target(output, target, output_name, target_name, options, check_ids), {},
                                 at::Reduction::None, options.ignore_index, options.label_smoothing);
  } else {
    require_shape(output.dim() >= 1 && target.sizes() == output.sizes(), output_name, output,
                  target_name, target, "equal shapes [B, ...]");
    // int targets against float outputs, or fp32 targets against bf16 outputs: compute in the
    // wider type rather than losing precision in the target.
    const at::ScalarType dtype = c10::promoteTypes(output.scalar_type(), target.scalar_type());
    const at::Tensor o = output.to(dtype);
    const at::Tensor t = target.to(dtype);
    per = term == Term::kMse ? at::mse_loss(o, t, at::Reduction::None)
                             : at::smooth_l1_loss(o, t, at::Reduction::None, options.beta);
  }
  if (per.dim() <= 1 || per.numel() == 0) return per.sum();
  return per.reshape({per.size(0), -1}).mean(1).sum();
}

tp::cpp::LossSum labelled_cross_entropy(const at::Tensor& output, const at::Tensor& target, const TermOptions& options,
                                        const std::string& output_name, const std::string& target_name,
                                        bool check_ids, const at::Tensor& class_weight) {
  const at::Tensor t = ce_target(output, target, output_name, target_name, options, check_ids);
  // PyTorch's sum over zero labelled positions is 0 (its mean would be 0/0 = NaN): the host adds
  // {0, 0} to the window, whose gradients stay finite.
  at::Tensor sum = at::cross_entropy_loss(output, t, class_weight, at::Reduction::Sum, options.ignore_index,
                                          options.label_smoothing);
  if (t.is_floating_point()) return {std::move(sum), count_tensor(t.numel() / t.size(1), output.device())};
  const at::Tensor labelled = t.ne(options.ignore_index);
  if (!class_weight.defined()) return {std::move(sum), labelled.sum()}; // on the device, no sync
  // The weights of the labelled positions' classes: PyTorch's weighted mean divides by their sum.
  const at::Tensor classes = t.masked_fill(labelled.logical_not(), 0).flatten();
  at::Tensor count = (class_weight.index_select(0, classes).view_as(t) * labelled).sum();
  return {std::move(sum), std::move(count)};
}

namespace {

constexpr const char* kCrossEntropyId = "org.torchhost.cross_entropy";
constexpr const char* kMseId = "org.torchhost.mse";
constexpr const char* kSmoothL1Id = "org.torchhost.smooth_l1";

/// cross_entropy, mse or smooth_l1 over one (output, target) pair.
class SingleTerm : public Loss {
 public:
  SingleTerm(Term term, std::string output, std::string target, TermOptions options,
             std::vector<double> class_weights = {})
      : term_(term), output_(std::move(output)), target_(std::move(target)), options_(options),
        class_weights_(std::move(class_weights)) {}

  tp::cpp::LossSum forward(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) override {
    const at::Tensor& out = outputs.get(output_);
    const at::Tensor& tgt = targets.get(target_);
    if (term_ != Term::kCrossEntropy)
      return {per_sample_sum(term_, out, tgt, options_, output_, target_, false), count_tensor(out.size(0), out.device())};
    // Items are the labelled positions: one per sample for [B, C] logits, one per pixel for
    // [B, C, H, W]; labels equal to ignore_index are neither summed nor counted.
    return labelled_cross_entropy(out, tgt, options_, output_, target_, ids_.due(tgt), class_weight(out));
  }

 private:
  /// class_weights on `out`'s device and dtype (DeviceWeights); undefined without.
  const at::Tensor& class_weight(const at::Tensor& out) {
    if (class_weights_.empty()) return class_weights_.like(out);
    if (out.dim() < 2 || out.size(1) != static_cast<int64_t>(class_weights_.size()))
      throw Failure(TP_ERR_INVALID_ARGUMENT,
                    std::string(kCrossEntropyId) + ": class_weights has " + std::to_string(class_weights_.size()) +
                        " values but the output '" + output_ + "' has " +
                        (out.dim() < 2 ? std::string("no class dimension") : std::to_string(out.size(1)) + " classes") +
                        ". Give one weight per class, in label-id order.");
    return class_weights_.like(out);
  }

  Term term_;
  std::string output_;
  std::string target_;
  TermOptions options_;
  DeviceWeights class_weights_;
  ClassIdCheck ids_;
};

std::unique_ptr<Loss> make_cross_entropy(const tp::cpp::ConfigReader& cfg) {
  TermOptions options;
  options.label_smoothing = cfg.get_float("label_smoothing");
  options.ignore_index = cfg.get_int("ignore_index");
  if (!(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0))
    throw Failure(TP_ERR_CONFIG, std::string(kCrossEntropyId) + ": label_smoothing must be in [0, 1], got " +
                                     std::to_string(options.label_smoothing));
  std::vector<double> class_weights = cfg.get_float_array("class_weights");
  for (const double w : class_weights)
    if (!(w >= 0.0 && std::isfinite(w)))
      throw Failure(TP_ERR_CONFIG, std::string(kCrossEntropyId) + ": class_weights must be finite and >= 0, got " +
                                       std::to_string(w));
  return std::make_unique<SingleTerm>(Term::kCrossEntropy, cfg.get_string("output"), cfg.get_string("target"), options,
                                      std::move(class_weights));
}

std::unique_ptr<Loss> make_mse(const tp::cpp::ConfigReader& cfg) {
  return std::make_unique<SingleTerm>(Term::kMse, cfg.get_string("output"), cfg.get_string("target"), TermOptions{});
}

std::unique_ptr<Loss> make_smooth_l1(const tp::cpp::ConfigReader& cfg) {
  TermOptions options;
  options.beta = cfg.get_float("beta");
  if (!(options.beta > 0.0))
    throw Failure(TP_ERR_CONFIG, std::string(kSmoothL1Id) + ": beta must be positive, got " + std::to_string(options.beta));
  return std::make_unique<SingleTerm>(Term::kSmoothL1, cfg.get_string("output"), cfg.get_string("target"), options);
}

const tp_config_key_t kCrossEntropyKeys[] = {
    tp::cpp::config_key("output", TP_CFG_STRING, "\"logits\"", "model output holding logits [B, C, ...]"),
    tp::cpp::config_key("target", TP_CFG_STRING, "\"label\"", "batch field with class indices (or probabilities)"),
    tp::cpp::config_key("label_smoothing", TP_CFG_FLOAT, "0.0", "label smoothing in [0, 1]"),
    tp::cpp::config_key("ignore_index", TP_CFG_INT, "-100", "class-index label neither summed nor counted (255 for segmentation masks)"),
    tp::cpp::config_key("class_weights", TP_CFG_FLOAT_ARRAY, "[]",
                        "one weight per class in label-id order, as PyTorch's CrossEntropyLoss(weight=...): the mean "
                        "divides by the labels' weights; [] = unweighted"),
};
const tp_config_key_t kMseKeys[] = {
    tp::cpp::config_key("output", TP_CFG_STRING, "\"bbox\"", "model output [B, ...]"),
    tp::cpp::config_key("target", TP_CFG_STRING, "\"bbox\"", "batch field of the same shape"),
};
const tp_config_key_t kSmoothL1Keys[] = {
    tp::cpp::config_key("output", TP_CFG_STRING, "\"bbox\"", "model output [B, ...]"),
    tp::cpp::config_key("target", TP_CFG_STRING, "\"bbox\"", "batch field of the same shape"),
    tp::cpp::config_key("beta", TP_CFG_FLOAT, "1.0", "where the loss turns from quadratic to linear (> 0)"),
};
const tp_example_input_t kLabelExample[] = {{sizeof(tp_example_input_t), "label", TP_DTYPE_INT64, 0, {}, 3}};
const tp_example_input_t kBoxExample[] = {{sizeof(tp_example_input_t), "bbox", TP_DTYPE_FLOAT32, 1, {4}, 0}};

const tp_descriptor_t kCrossEntropyDescriptor = tp::cpp::loss_descriptor(
    kCrossEntropyId, "1.0.0", "cross entropy; sum over labelled samples (or pixels), count of them",
    kCrossEntropyKeys, kLabelExample);
const tp_descriptor_t kMseDescriptor = tp::cpp::loss_descriptor(
    kMseId, "1.0.0", "mean squared error per sample, summed over the batch; count = batch size", kMseKeys,
    kBoxExample);
const tp_descriptor_t kSmoothL1Descriptor = tp::cpp::loss_descriptor(
    kSmoothL1Id, "1.0.0", "smooth L1 (Huber / beta) per sample, summed over the batch; count = batch size",
    kSmoothL1Keys, kBoxExample);

const tp::cpp::Component kComponents[] = {
    tp::cpp::loss_component<Loss, kCrossEntropyDescriptor, &make_cross_entropy>(),
    tp::cpp::loss_component<Loss, kMseDescriptor, &make_mse>(),
    tp::cpp::loss_component<Loss, kSmoothL1Descriptor, &make_smooth_l1>(),
    tp::cpp::loss_component<Loss, kWeightedSumDescriptor, &make_weighted_sum>(),
    tp::cpp::loss_component<Loss, kBceDescriptor, &make_bce_with_logits>(),
    tp::cpp::loss_component<Loss, kDiceDescriptor, &make_dice>(),
    tp::cpp::loss_component<Loss, kFocalDescriptor, &make_focal>(),
};

}  // namespace
}  // namespace tp::losses

TP_DEFINE_PLUGIN("basic_losses", TP_TORCH_BUILD_INFO_INIT, tp::losses::kComponents)
