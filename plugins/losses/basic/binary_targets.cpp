// The 0/1 targets of the sigmoid losses over dense logits [B, C, d...] (bce_with_logits on
// segmentation masks, focal): a mask of the logits' shape, a binary mask [B, d...] for one logit a
// pixel (smp's mode "binary"), or class ids one-hot over C (smp's FocalLoss(mode="multiclass")),
// with an integer mask's ignore_index pixels left out.
#include <c10/util/StringUtil.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/one_hot.h>

#include <string>
#include <vector>

#include "loss_terms.h"

namespace tp::losses {

using tp::cpp::Failure;

namespace {

/// Refuses a value of a binary mask (one logit a pixel) other than 0, 1 and ignore_index: a 0/255
/// mask read as 0/1 trained every foreground pixel as 255 (dense trial F1's masks).
void check_binary_values(const at::Tensor& mask, int64_t ignore_index, const std::string& component,
                         const std::string& output_name, const std::string& target_name) {
  if (mask.numel() == 0) return;
  const auto [low, high] = at::aminmax(mask.masked_fill(mask.eq(ignore_index), 0));
  const int64_t least = low.item<int64_t>(), most = high.item<int64_t>();
  if (least >= 0 && most <= 1) return;
  const std::string bad = std::to_string(least < 0 ? least : most);
  throw Failure(TP_ERR_INVALID_ARGUMENT,
                component + ": target '" + target_name + "' holds the value " + bad + " where output '" + output_name +
                    "' has one logit a pixel (binary: 0 = background, 1 = foreground) and ignore_index is " +
                    std::to_string(ignore_index) + ". If " + bad + " marks what to leave out, set ignore_index = " +
                    bad + "; if it is the foreground (a 0/255 mask), map it to 1 in the dataset; for several "
                    "classes give the model one logit per class.");
}

}  // namespace

BinaryTargets binary_targets(const at::Tensor& logits, const at::Tensor& target, int64_t ignore_index,
                             at::ScalarType dtype, const std::string& component, const std::string& output_name,
                             const std::string& target_name, bool check_values) {
  const auto refuse = [&] {
    std::vector<int64_t> mask_shape = logits.sizes().vec();
    if (!mask_shape.empty()) mask_shape.erase(mask_shape.begin() + 1);
    return Failure(TP_ERR_INVALID_ARGUMENT,
                   component + ": output '" + output_name + "' " + c10::str(logits.sizes()) + " and target '" +
                       target_name + "' " + c10::str(target.sizes()) + ": expected logits [B, C, ...] with targets of "
                       "their shape " + c10::str(logits.sizes()) + ", or a mask " + c10::str(at::IntArrayRef(mask_shape)) +
                       " (one logit a pixel: 0/1; C logits: integer class ids, one-hot)");
  };
  if (logits.dim() < 2) throw refuse();
  const int64_t channels = logits.size(1);
  if (target.sizes() == logits.sizes()) {
    if (target.is_floating_point()) return {target.to(dtype), {}};
    // An integer mask per channel (smp's multilabel): elements equal to ignore_index are left out.
    const at::Tensor valid = target.ne(ignore_index);
    if (check_values) check_binary_values(target, ignore_index, component, output_name, target_name);
    return {target.masked_fill(valid.logical_not(), 0).to(dtype), valid};
  }
  std::vector<int64_t> mask_shape = logits.sizes().vec();
  mask_shape.erase(mask_shape.begin() + 1);
  if (target.sizes() != at::IntArrayRef(mask_shape)) throw refuse();
  if (target.is_floating_point()) {
    if (channels != 1) throw refuse();  // float class ids are a dtype mistake, not a target
    return {target.unsqueeze(1).to(dtype), {}};
  }
  const at::Tensor ids = target.to(at::kLong);
  const at::Tensor valid = ids.ne(ignore_index).unsqueeze(1);
  const at::Tensor kept = ids.masked_fill(ids.eq(ignore_index), 0);
  if (channels == 1) {
    if (check_values) check_binary_values(ids, ignore_index, component, output_name, target_name);
    return {kept.unsqueeze(1).to(dtype), valid};
  }
  if (check_values) {
    TermOptions options;
    options.ignore_index = ignore_index;
    check_class_ids(logits, ids, options, output_name, target_name);
  }
  // one_hot puts the class last: [B, d..., C] -> [B, C, d...].
  return {at::one_hot(kept, channels).movedim(-1, 1).to(dtype), valid};
}

}  // namespace tp::losses
