// efficientnet: the layers EfficientNet and MobileNetV3 share, each a torch::nn::Module whose
// children carry torchvision's names, so the state names are torchvision's state_dict keys:
//   ConvNormActivation  torchvision.ops.Conv2dNormActivation: "0" conv (no bias), "1" BatchNorm
//   SqueezeExcitation   torchvision.ops.SqueezeExcitation: "fc1", "fc2" (1x1 convs with bias)
//   InvertedResidual    MBConv (EfficientNet) and InvertedResidual (MobileNetV3): "block.<i>"
// Activations have no state, so they are functions here (torchvision's modules at those indices
// own no parameters and do not appear in state_dict).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tp/cpp/activation_checkpoint.h"
#include "tp/cpp/model_layers.h"

namespace tp::efficientnet {

/// torchvision.models._utils._make_divisible(v, divisor) with min_value = divisor: `v` rounded
/// to the nearest multiple of `divisor`, never below `divisor` nor more than 10% below `v`.
int64_t make_divisible(double v, int64_t divisor = 8);

/// The activations the two families use; kNone ends a projection.
enum class Activation { kNone, kReLU, kSiLU, kHardswish, kSigmoid, kHardsigmoid };
/// `x` through `a` (out of place: block inputs stay untouched, as checkpointing requires).
at::Tensor activate(Activation a, const at::Tensor& x);

/// BatchNorm2d's two hyperparameters, which differ between the families and variants, and how
/// its training forward runs.
struct NormOptions {
  double eps = 1e-5;
  double momentum = 0.1;
  /// BatchNorm + activation through tp::cpp::batch_norm_act's fused path where it applies (training,
  /// channels-last CUDA input, a host with the ops); false: the module ops always.
  bool fused = false;
};

/// torchvision's StochasticDepth(p, mode="row") (tp/cpp/model_layers.h).
using tp::cpp::stochastic_depth;

/// A layer of an inverted residual's "block" list.
class BlockLayer : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;
};

/// Conv2d(in, out, kernel, stride, padding (kernel - 1) / 2 * dilation, dilation, groups,
/// bias=False) - BatchNorm2d - activation: torchvision's Conv2dNormActivation as every block of
/// both families uses it. BatchNorm and the activation run through tp::cpp::batch_norm_act (fused
/// where NormOptions::fused and the SDK's conditions allow; bit for bit the module ops otherwise).
class ConvNormActivation : public BlockLayer {
 public:
  ConvNormActivation(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t groups,
                     const NormOptions& norm, Activation activation, int64_t dilation = 1);
  at::Tensor forward(const at::Tensor& x) override;

 private:
  torch::nn::Conv2d conv_{nullptr};
  torch::nn::BatchNorm2d norm_{nullptr};
  Activation activation_;
  bool fused_;
};

/// x * scale(fc2(activation(fc1(avg_pool(x))))): torchvision's SqueezeExcitation, with SiLU and
/// Sigmoid in EfficientNet, ReLU and Hardsigmoid in MobileNetV3.
class SqueezeExcitation : public BlockLayer {
 public:
  SqueezeExcitation(int64_t channels, int64_t squeeze, Activation activation, Activation scale);
  at::Tensor forward(const at::Tensor& x) override;

 private:
  torch::nn::Conv2d fc1_{nullptr}, fc2_{nullptr};
  Activation activation_, scale_;
};

/// One inverted residual block, as torchvision builds MBConv and InvertedResidual.
struct InvertedResidualSpec {
  int64_t in = 0;
  int64_t expanded = 0;  ///< no expansion conv when equal to `in`
  int64_t out = 0;
  int64_t kernel = 3;
  int64_t stride = 1;
  int64_t dilation = 1;  ///< > 1: the depthwise conv dilates instead of striding (MobileNetV3's dilated tail)
  int64_t squeeze = 0;   ///< squeeze-excitation channels; 0: no squeeze-excitation
  Activation activation = Activation::kSiLU;
  Activation se_activation = Activation::kSiLU;
  Activation se_scale = Activation::kSigmoid;
  double stochastic_depth_prob = 0.0;  ///< of the residual branch (EfficientNet only)
};

/// [expand 1x1 - act] - depthwise kxk/stride (or stride 1 and `dilation`) - act -
/// [squeeze-excitation] - project 1x1, plus the input when stride 1 and in == out (the residual branch then goes through stochastic
/// depth first). forward reads `x` only: a checkpoint unit.
class InvertedResidual : public torch::nn::Module {
 public:
  InvertedResidual(const InvertedResidualSpec& spec, const NormOptions& norm);
  at::Tensor forward(const at::Tensor& x);

 private:
  std::vector<std::shared_ptr<BlockLayer>> layers_;
  bool residual_;
  double stochastic_depth_prob_;
};

/// The body EfficientNet and MobileNetV3 share: a stem conv, the InvertedResidual blocks and a
/// last conv, each a checkpoint unit. The subclass builds and registers them under torchvision's
/// names, and its own classifier.
class FeatureNet : public torch::nn::Module, public tp::cpp::Checkpointable {
 public:
  /// The maps after the units at `indices` (ascending; 0 the stem, 1.. the blocks, blocks + 1 the
  /// last conv: torchvision's `features` indices), running the units up to the last index only,
  /// as torchvision's IntermediateLayerGetter does. Each unit is a checkpoint unit.
  std::vector<at::Tensor> feature_maps(const at::Tensor& x, const std::vector<size_t>& indices) const;

 protected:
  /// stem, blocks, last conv: [B, in_channels, H, W] -> the last conv's map. Each unit runs
  /// through checkpoint_block (its lambda captures the module by value: it lives until backward).
  at::Tensor features(const at::Tensor& x) const;

  std::shared_ptr<ConvNormActivation> stem_, head_conv_;
  std::vector<std::shared_ptr<InvertedResidual>> blocks_;  // in order
};

/// torchvision's classification heads initialise their own Linear layers; convolutions and norms
/// of both families start alike: kaiming_normal_(mode="fan_out") (gain sqrt(2)), bias 0,
/// BatchNorm weight 1 and bias 0. Applies that to every Conv2d and BatchNorm2d under `root`.
void init_convs_and_norms(torch::nn::Module& root);

}  // namespace tp::efficientnet
