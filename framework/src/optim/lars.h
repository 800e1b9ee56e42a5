// LARS (You, Gitman and Ginsburg, "Large Batch Training of Convolutional Networks"), as timm
// 1.0.31's timm.optim.Lars computes it with foreach=False: per parameter, the gradient plus weight
// decay times the weight is scaled by the trust ratio
//   trust_coeff x ||w|| / (||g|| + weight_decay x ||w|| + eps)
// (1 where either norm is 0; with trust_clip, timm's LARC, min(ratio / lr, 1)), then SGD's
// momentum (dampening, Nesterov) and `w -= lr x update`. The adaptation and the decay apply only
// in groups with weight decay, unless always_adapt: the factory's default rule gives biases and
// norm weights (dim < 2) no decay, so they take a plain SGD-with-momentum step, the SSL recipes'
// exclusion (SimCLR, BYOL), with no key of its own.
//
// Why a class of its own: LibTorch has no LARS. It follows the torch::optim classes, as Lamb does
// (lamb.h): options per parameter group, state per parameter (SGD's momentum_buffer, created from
// the first update as torch.optim.SGD and timm do), save()/load() through torch::optim::serialize
// so a checkpoint resumes bit for bit. LarsOptions derives from SGDOptions so that OneCycle's
// momentum cycling finds LARS's momentum, as torch's OneCycleLR cycles timm's Lars groups'
// "momentum".
//
// Not here: timm's foreach path (its default on CUDA; the same arithmetic per element) and a
// fused kernel (optim.implementation = "fused" is refused). No host read per step: the norms and
// trust ratios stay on the device. Private to the optimizer factory.
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <memory>

namespace tp::detail {

/// LARS's options: SGDOptions' lr, momentum, dampening, weight_decay and nesterov, plus timm's Lars
/// keys with timm's defaults. Set fields one by one: the inherited setters return SGDOptions&, so
/// a chain would slice.
struct LarsOptions : torch::optim::SGDOptions {
  explicit LarsOptions(double lr = 1.0);
  /// eta of the trust ratio (timm's trust_coeff).
  TORCH_ARG(double, trust_coeff) = 0.001;
  /// Added to the trust ratio's denominator (timm's eps).
  TORCH_ARG(double, eps) = 1e-8;
  /// LARC: the ratio becomes min(ratio / lr, 1) (timm's trust_clip).
  TORCH_ARG(bool, trust_clip) = false;
  /// Adapt (and decay) parameters of groups without weight decay too (timm's always_adapt).
  TORCH_ARG(bool, always_adapt) = false;

 public:  // TORCH_ARG leaves the access private
  std::unique_ptr<torch::optim::OptimizerOptions> clone() const override;
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
};

/// timm's Lars(foreach=False) over torch::optim parameter groups (see the file comment). The
/// per-parameter state is torch::optim::SGDParamState (momentum_buffer), present once a parameter
/// was updated with momentum != 0.
class Lars : public torch::optim::Optimizer {
 public:
  /// Throws c10::Error for a negative lr, momentum, weight decay or eps, a trust_coeff <= 0, or
  /// Nesterov without momentum or with dampening (the factory validates the keys first, with
  /// messages naming them).
  Lars(const std::vector<torch::optim::OptimizerParamGroup>& param_groups, const LarsOptions& defaults);
  /// One update of every parameter with a gradient; throws for a sparse gradient.
  torch::Tensor step(LossClosure closure = nullptr) override;
  /// torch::optim's archive layout: per-parameter states and per-group options.
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;
};

}  // namespace tp::detail
