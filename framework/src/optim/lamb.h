// LAMB (You et al., "Large Batch Optimization for Deep Learning"), as timm 1.0.31's
// timm.optim.Lamb computes it with foreach=False (NVIDIA's NvLamb variant): Adam moments of the
// gradient, the bias-corrected Adam direction plus weight decay times the weight, scaled per
// parameter by the trust ratio ||w|| / ||update||, the whole step then lr times that. timm's
// optional global gradient-norm clip (max_grad_norm) runs first, on copies of the gradients.
//
// Why a class of its own: LibTorch has no LAMB. It follows the torch::optim classes so the rest
// of the host treats it as any optimizer: options per parameter group (lr, weight decay, betas,
// eps, LAMB's switches), state per parameter (exp_avg, exp_avg_sq and the step count, as
// AdamWParamState), and save()/load() through torch::optim::serialize, so a checkpoint resumes
// bit for bit. LambOptions derives from AdamWOptions so that code reading beta1 from Adam-like
// options (OneCycle's momentum cycling) finds LAMB's; torch.optim's OneCycleLR cycles timm's
// Lamb's beta1 too, since its groups have "betas".
//
// Where it differs from timm: timm counts steps per parameter group (group["step"], advanced even
// when no parameter of the group has a gradient); this counts per parameter, as torch.optim's
// Adam does. The two agree whenever every parameter of a group gets a gradient at every step,
// i.e. always but for `freeze = true` rules, where the first update after unfreezing here gets
// the bias correction of a first step. Per-tensor loop on every device (no foreach/fused path);
// no host read per step (the clip factor and trust ratios stay on the device).
// Private to the optimizer factory.
#pragma once

#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <memory>

namespace tp::detail {

/// LAMB's options: AdamWOptions' lr, betas, eps and weight_decay (amsgrad unused), plus timm's
/// Lamb switches, with timm's defaults. Set fields one by one: the inherited setters return
/// AdamWOptions&, so a chain would slice.
struct LambOptions : torch::optim::AdamWOptions {
  explicit LambOptions(double lr = 1e-3);
  /// Divide the moments by 1 - beta^step (timm's bias_correction).
  TORCH_ARG(bool, bias_correction) = true;
  /// exp_avg takes (1 - beta1) x grad; false: the whole grad (timm's grad_averaging).
  TORCH_ARG(bool, grad_averaging) = true;
  /// Before the update, gradients are divided by max(1, global 2-norm / this); 0 = no clip
  /// (timm's max_grad_norm = None). Read from the first group: it is one value for the optimizer.
  TORCH_ARG(double, max_grad_norm) = 1.0;
  /// Clamp the trust ratio at 1 (LAMBC, timm's trust_clip).
  TORCH_ARG(bool, trust_clip) = false;
  /// Apply the trust ratio to parameters without weight decay too (timm's always_adapt).
  TORCH_ARG(bool, always_adapt) = false;

 public:  // TORCH_ARG leaves the access private
  std::unique_ptr<torch::optim::OptimizerOptions> clone() const override;
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
};

/// Per-parameter state: the step count and the two moments.
struct LambParamState : torch::optim::OptimizerCloneableParamState<LambParamState> {
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(at::Tensor, exp_avg);
  TORCH_ARG(at::Tensor, exp_avg_sq);

 public:  // TORCH_ARG leaves the access private
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
};

/// timm's Lamb(foreach=False) over torch::optim parameter groups (see the file comment).
class Lamb : public torch::optim::Optimizer {
 public:
  /// Throws c10::Error for a negative lr, eps, weight decay or max_grad_norm, or a beta outside
  /// [0, 1) (the factory validates the keys first, with messages naming them).
  Lamb(const std::vector<torch::optim::OptimizerParamGroup>& param_groups, const LambOptions& defaults);
  /// One update of every parameter with a gradient; throws for a sparse gradient.
  torch::Tensor step(LossClosure closure = nullptr) override;
  /// torch::optim's archive layout: per-parameter states and per-group options.
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 private:
  /// timm's _get_clip_grad_norm: max(1, ||all grads||_2 / max_grad_norm) as a 0-dim tensor on the
  /// gradients' device; undefined when the clip is off or no parameter has a gradient.
  at::Tensor clip_divisor() const;
};

}  // namespace tp::detail
