// Lion (Chen et al., "Symbolic Discovery of Optimization Algorithms"), as timm 1.0.31's
// timm.optim.Lion computes it with foreach=False: decoupled weight decay `w *= 1 - lr x wd`, then
// `w -= lr x sign(beta1 x m + (1 - beta1) x g)`, then the momentum `m = beta2 x m + (1 - beta2) x g`
// (both as lerps). With caution (timm's clion) the sign update is kept only where it agrees in
// sign with the gradient, rescaled by the kept fraction.
//
// Why a class of its own: LibTorch has no Lion. It follows the torch::optim classes, as Lamb does
// (lamb.h): options per parameter group, state per parameter (exp_avg), save()/load() through
// torch::optim::serialize so a checkpoint resumes bit for bit. LionOptions derives from
// AdamWOptions so that OneCycle's momentum cycling finds beta1, as torch's OneCycleLR cycles the
// "betas" of timm's Lion groups; AdamW's eps and amsgrad are carried but unused.
//
// Not here: timm's corrected_weight_decay (lionc: lr^2 / max_lr, the max lr snapshotted at
// construction) and maximize. Per-tensor loop on every device (timm's foreach path computes the
// same per element); no host read per step. Private to the optimizer factory.
#pragma once

#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <memory>

namespace tp::detail {

/// Lion's options: AdamWOptions' lr, betas and weight_decay (eps and amsgrad unused) with timm's
/// defaults (betas (0.9, 0.99), weight decay 0), plus caution. Set fields one by one: the
/// inherited setters return AdamWOptions&, so a chain would slice.
struct LionOptions : torch::optim::AdamWOptions {
  explicit LionOptions(double lr = 1e-4);
  /// Keep the update only where sign(update) x grad > 0, divided by the kept fraction (at least
  /// 1e-3): timm's caution (clion).
  TORCH_ARG(bool, caution) = false;

 public:  // TORCH_ARG leaves the access private
  std::unique_ptr<torch::optim::OptimizerOptions> clone() const override;
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
};

/// Per-parameter state: the momentum. Lion keeps no step count.
struct LionParamState : torch::optim::OptimizerCloneableParamState<LionParamState> {
  TORCH_ARG(at::Tensor, exp_avg);

 public:  // TORCH_ARG leaves the access private
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
};

/// timm's Lion(foreach=False) over torch::optim parameter groups (see the file comment).
class Lion : public torch::optim::Optimizer {
 public:
  /// Throws c10::Error for a negative lr or weight decay, or a beta outside [0, 1) (the factory
  /// validates the keys first, with messages naming them).
  Lion(const std::vector<torch::optim::OptimizerParamGroup>& param_groups, const LionOptions& defaults);
  /// One update of every parameter with a gradient; throws for a sparse gradient.
  torch::Tensor step(LossClosure closure = nullptr) override;
  /// torch::optim's archive layout: per-parameter states and per-group options.
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;
};

}  // namespace tp::detail
