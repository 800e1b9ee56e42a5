// org.torchhost.resnet: torchvision's ResNet (18, 34, 50) as a torch::nn::Module.
//
// The module tree mirrors torchvision.models.resnet so that the state names are torchvision's
// state_dict keys ("conv1.weight", "layer1.0.bn1.running_mean", "layer2.0.downsample.0.weight",
// "fc.bias"): a torchvision checkpoint loads through train.init_weights unchanged. Bottleneck is
// "v1.5" (stride on the 3x3 conv), as in torchvision.
//
// Activation checkpointing: the stem (conv1-bn1-ReLU-maxpool) and every residual block are
// checkpoint units; with the switch on, training keeps only their inputs (one tensor per block)
// and recomputes the rest in backward.
//
// Layer depths (optim.layer_decay): the stem at 0, each residual block one deeper, fc the head.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tp/cpp/activation_checkpoint.h"
#include "tp/cpp/model_adapter.h"

namespace tp::resnet {

/// A residual block (BasicBlock or Bottleneck). forward reads `x` only (no in-place on it), which
/// is what a checkpoint unit requires.
class ResidualBlock : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  /// The BatchNorm whose weight zero_init_residual zeroes (bn2 of BasicBlock, bn3 of Bottleneck).
  virtual torch::nn::BatchNorm2d& last_norm() = 0;
};

/// What the config chooses.
struct ResNetOptions {
  int64_t depth = 18;        ///< 18 | 34 | 50
  int64_t num_classes = 1000;
  int64_t in_channels = 3;
  bool zero_init_residual = false;
};

/// torchvision.models.resnet{18,34,50}(num_classes=...), with a configurable number of input
/// channels. Initialised as torchvision does: convolutions kaiming_normal_(fan_out, relu),
/// BatchNorm weight 1 and bias 0, fc LibTorch's (= PyTorch's) Linear default; with
/// zero_init_residual the last BatchNorm weight of every block is 0, so each block starts as the
/// identity.
class ResNet : public torch::nn::Module, public tp::cpp::Checkpointable {
 public:
  /// `options.depth` must be 18, 34 or 50 and the others positive (the plugin validates them).
  explicit ResNet(const ResNetOptions& options);
  /// [B, in_channels, H, W] -> logits [B, num_classes]; any H, W >= 1 (adaptive average pool).
  at::Tensor forward(const at::Tensor& x);
  /// optim.layer_decay's ordering, timm's ResNet group_matcher: the stem (conv1, bn1) at depth 0,
  /// then every residual block ("layer1.0", "layer1.1", ...) one deeper; fc is the head.
  std::vector<tp::cpp::LayerDepth> layer_depths() const;

 private:
  /// Appends layer`index` (1..4) of `blocks` blocks with `planes` planes; the first has `stride`.
  void make_layer(int index, int64_t planes, int64_t blocks, int64_t stride);
  /// conv1 - bn1 - ReLU - maxpool 3x3/2.
  at::Tensor stem(const at::Tensor& x);

  bool bottleneck_;
  int64_t in_planes_ = 64;
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr};
  std::vector<std::shared_ptr<ResidualBlock>> blocks_;  // every block of layer1..layer4, in order
  std::vector<std::string> block_names_;               // their prefixes, "layer1.0", ...
  torch::nn::Linear fc_{nullptr};
};

}  // namespace tp::resnet
