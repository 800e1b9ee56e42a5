// basic_losses: the loss terms the components share, and the base class of the components
// (tp/cpp/loss_adapter.h turns each into a tp_loss_v1_t table).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tp/cpp/config.h"
#include "tp/cpp/loss_adapter.h"
#include "tp/entry.h"

namespace tp::losses {

/// The terms a component (or one entry of weighted_sum) can compute. kDice is a batch's value,
/// not a sum over items: weighted_sum scales it by the count (weighted_sum.cpp).
enum class Term { kCrossEntropy, kMse, kSmoothL1, kDice };

/// Term named "cross_entropy", "mse", "smooth_l1" or "dice"; throws tp::cpp::Failure(TP_ERR_CONFIG)
/// naming `component` and the accepted names otherwise.
Term term_from_name(const std::string& name, const char* component);

/// Options of the terms; each term reads only its own.
struct TermOptions {
  double label_smoothing = 0.0;  // cross_entropy, in [0, 1]
  int64_t ignore_index = -100;   // cross_entropy: a class-index label that is neither summed nor counted
  double beta = 1.0;             // smooth_l1, > 0
};

/// When a cross entropy reads its targets' class ids (check_class_ids): every batch on the CPU,
/// where reading two numbers back costs nothing, and the first on a device, one sync per instance
/// (PLG-11 allows none in forward; fcos_loss's label check makes the same exception).
class ClassIdCheck {
 public:
  /// Whether this call's target is read; a device target is due once per instance.
  bool due(const at::Tensor& target) {
    if (target.is_cpu()) return true;
    const bool first = !device_done_;
    device_done_ = true;
    return first;
  }

 private:
  bool device_done_ = false;
};

/// Per-class values from a component's config (cross_entropy's class_weights, bce_with_logits'
/// pos_weight) as a tensor on an output's device and dtype, made once per device and dtype: a copy
/// to the device at every step would be a host-to-device transfer the step waits for.
class DeviceWeights {
 public:
  explicit DeviceWeights(std::vector<double> values) : values_(std::move(values)) {}
  bool empty() const noexcept { return values_.empty(); }
  std::size_t size() const noexcept { return values_.size(); }
  /// The values on `output`'s device and dtype; undefined when there are none. A normal tensor
  /// even when the first call is an evaluation's (inference mode): training's autograd cannot
  /// save an inference tensor for backward.
  const at::Tensor& like(const at::Tensor& output);

 private:
  std::vector<double> values_;
  at::Tensor tensor_;
};

/// The sum over samples of one term (differentiable, 0-dim, on output's device). Per-sample loss:
/// cross_entropy of the sample's logits (mean over positions for [B, C, d...] logits, where a
/// position labelled options.ignore_index adds 0 but still counts); mse and smooth_l1 the mean
/// over the sample's elements. Targets of another shape are an error (no
/// broadcasting), named by `output_name` / `target_name`. With `check_ids`, a cross entropy's
/// class-index label outside [0, C) of the logits that is not options.ignore_index is refused,
/// naming it (one min/max reduction over the target, a device sync off the CPU: ClassIdCheck says
/// when); else never synchronizes.
at::Tensor per_sample_sum(Term term, const at::Tensor& output, const at::Tensor& target,
                          const TermOptions& options, const std::string& output_name,
                          const std::string& target_name, bool check_ids);

/// Refuses a class id of `ids` (int64, labels of `output`'s [B, C, ...]) outside [0, C) that is not
/// options.ignore_index, naming the value, both fields and the fixes. Reads back two numbers (a
/// device sync off the CPU: call it when ClassIdCheck says so).
void check_class_ids(const at::Tensor& output, const at::Tensor& ids, const TermOptions& options,
                     const std::string& output_name, const std::string& target_name);

/// Per-element 0/1 targets for sigmoid losses over dense logits [B, C, d...] (bce_with_logits on
/// masks, focal): `target` of the logits' shape and dtype, and `valid` (bool, broadcastable to
/// the logits) where an integer mask is not ignore_index, undefined when every element counts.
struct BinaryTargets {
  at::Tensor target;
  at::Tensor valid;
};

/// The targets a sigmoid loss reads from `target` for `logits` [B, C, d...]: a tensor of the
/// logits' shape (float as given; integer 0/1, elements equal to ignore_index left out); or a
/// mask [B, d...]: with C = 1 its values are the targets (0/1, float or integer; 1 = foreground),
/// with C > 1 integer class ids one-hot over C (smp's multiclass masks), and an integer mask's
/// ignore_index pixels left out on every channel. With `check_values` an integer mask is read
/// once (min/max, a device sync off the CPU) and a value that is neither a target (0/1, or a class
/// id below C) nor ignore_index is refused, naming it. Other shapes are refused naming `component`,
/// both fields, their shapes and the shapes accepted. The targets are computed in `dtype`.
BinaryTargets binary_targets(const at::Tensor& logits, const at::Tensor& target, int64_t ignore_index,
                             at::ScalarType dtype, const std::string& component, const std::string& output_name,
                             const std::string& target_name, bool check_values);

/// Options of smp's DiceLoss (segmentation_models_pytorch 0.6).
struct DiceOptions {
  enum class Mode { kBinary, kMulticlass, kMultilabel };
  Mode mode = Mode::kMulticlass;
  bool from_logits = true;
  double smooth = 0.0;
  double eps = 1e-7;
  int64_t ignore_index = -100;   ///< smp's None is any value no mask holds
  bool log_loss = false;
  std::vector<int64_t> classes;  ///< the classes averaged; empty: all
};

/// smp's DiceLoss(mode, ...)(output, target) on one batch: a differentiable 0-dim tensor, the mean
/// over the classes of 1 − Dice (or −log Dice) over the whole batch, a class absent from the
/// batch's targets adding 0. Output [B, C, d...] (binary: C = 1), computed in float32 at least;
/// target [B, d...] (binary: 0/1, or [B, 1, d...]; multiclass: class ids) or the output's shape
/// (multilabel). Shapes and ids are refused as binary_targets does (`check_ids`: read the ids).
at::Tensor dice_loss(const at::Tensor& output, const at::Tensor& target, const DiceOptions& options,
                     const std::string& component, const std::string& output_name, const std::string& target_name,
                     bool check_ids);

/// A 0-dim int64 tensor holding `count` on `device`, created without a device sync.
at::Tensor count_tensor(int64_t count, const at::Device& device);

/// Cross entropy over the labelled positions: `sum` over every position whose class-index label
/// is not options.ignore_index (differentiable, 0-dim) and `count`, their number (0-dim int64,
/// counted on the device). Probability targets [B, C, d...] label every position. A batch with no
/// labelled position gives sum 0 and count 0 (never NaN). With `class_weight` ([C], on the
/// output's device and dtype) each position's loss is weighted by its label's class and `count`
/// is the sum of those weights (float), so sum / count is PyTorch's weighted mean
/// (CrossEntropyLoss(weight=...)); probability targets still count positions, as PyTorch's mean
/// does. Shapes and `check_ids` as per_sample_sum; never synchronizes otherwise.
tp::cpp::LossSum labelled_cross_entropy(const at::Tensor& output, const at::Tensor& target, const TermOptions& options,
                                        const std::string& output_name, const std::string& target_name,
                                        bool check_ids, const at::Tensor& class_weight = {});

/// One loss component instance, the class tp/cpp/loss_adapter.h drives: returns {loss_sum,
/// item_count}.
class Loss {
 public:
  virtual ~Loss() = default;
  /// Both borrowed for the call; throws tp::cpp::Failure naming a missing field.
  virtual tp::cpp::LossSum forward(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) = 0;
  /// The named terms of the last forward(): detached 0-dim sums adding up to its loss sum; names
  /// valid until destruction. Empty for a single-term loss (its total is its only term).
  virtual std::vector<tp::cpp::LossTerm> terms() const { return {}; }
};

std::unique_ptr<Loss> make_weighted_sum(const tp::cpp::ConfigReader& cfg);
extern const tp_descriptor_t kWeightedSumDescriptor;
std::unique_ptr<Loss> make_bce_with_logits(const tp::cpp::ConfigReader& cfg);
extern const tp_descriptor_t kBceDescriptor;
std::unique_ptr<Loss> make_dice(const tp::cpp::ConfigReader& cfg);
extern const tp_descriptor_t kDiceDescriptor;
std::unique_ptr<Loss> make_focal(const tp::cpp::ConfigReader& cfg);
extern const tp_descriptor_t kFocalDescriptor;

}  // namespace tp::losses
