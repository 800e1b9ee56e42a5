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
//
// Stochastic depth (ResNetOptions::drop_path_rate): timm's DropPath on each block's residual
// branch, before the add, at timm's per-block rates. It draws its masks from the default
// generators, so the host's seed and resume, and the checkpoint recompute, replay them.
//
// BatchNorm + ReLU, BatchNorm + residual add + ReLU and the downsample's BatchNorm run fused on CUDA
// in training (ResNetOptions::fused_norm, tp/cpp/fused_norm.h); the module tree and state are the
// same either way.
//
// The segmentation models (plugins/models/segmentation) use it as their backbone: without fc,
// with torchvision's replace_stride_with_dilation, read through stages().
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <array>
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
  /// The probability that training drops this block's residual branch for a sample (timm's
  /// DropPath rate; 0: never, and nothing is drawn).
  double drop_path_rate() const noexcept { return drop_path_rate_; }

 protected:
  /// `drop_path_rate` in [0, 1).
  explicit ResidualBlock(double drop_path_rate) : drop_path_rate_(drop_path_rate) {}
  /// The block's end, relu(drop_path(bn(branch)) + identity), as timm's blocks compute it: in
  /// training with a non-zero rate the branch's BatchNorm (tp::cpp::batch_norm) is multiplied by a
  /// per-sample mask (tp::cpp::stochastic_depth: timm's drop_path, scaled by 1 / keep), then the
  /// identity is added and ReLU applied; otherwise tp::cpp::batch_norm_relu(bn, branch, identity),
  /// today's (fused) path. Reads `branch` and `identity` only.
  at::Tensor residual_end(torch::nn::BatchNorm2d& bn, const at::Tensor& branch, const at::Tensor& identity,
                          bool fused_norm);

 private:
  double drop_path_rate_;
};

/// What the config chooses.
struct ResNetOptions {
  int64_t depth = 18;        ///< 18 | 34 | 50
  int64_t num_classes = 1000;
  int64_t in_channels = 3;
  bool zero_init_residual = false;
  /// torchvision's replace_stride_with_dilation, for layer2, layer3, layer4: such a stage keeps
  /// its input's resolution (stride 1) and dilates its 3x3 convolutions by the stride it gave up,
  /// compounded over the stages (segmentation's [false, true, true]: layer3 at 2, layer4 at 4).
  /// Bottleneck (depth 50) only, as in torchvision.
  std::array<bool, 3> replace_stride_with_dilation = {false, false, false};
  /// false: no fc and no pooling (torchvision's IntermediateLayerGetter drops both), for a dense
  /// head reading stages(); num_classes is then unused.
  bool fc = true;
  /// Each BatchNorm followed by ReLU (and each block's last BatchNorm + identity + ReLU) through
  /// tp::cpp::batch_norm_relu, each downsample's BatchNorm through tp::cpp::batch_norm: the host's
  /// fused CUDA ops in training on channels-last CUDA input, the module path elsewhere
  /// (tp/cpp/fused_norm.h says when). false: always the module path.
  bool fused_norm = true;
  /// timm's drop_path_rate: block i (0-based, over all stages) drops its residual branch per
  /// sample in training with probability drop_path_rate * i / (blocks - 1), so the first never and
  /// the last at drop_path_rate. 0: no stochastic depth (today's network, no draws). In [0, 1).
  double drop_path_rate = 0.0;
};

/// torchvision.models.resnet{18,34,50}(num_classes=...), with a configurable number of input
/// channels. Initialised as torchvision does: convolutions kaiming_normal_(fan_out, relu),
/// BatchNorm weight 1 and bias 0, fc LibTorch's (= PyTorch's) Linear default; with
/// zero_init_residual the last BatchNorm weight of every block is 0, so each block starts as the
/// identity.
class ResNet : public torch::nn::Module, public tp::cpp::Checkpointable {
 public:
  /// `options.depth` must be 18, 34 or 50 and the others positive (the plugin validates them);
  /// throws c10::Error for a dilation with depth 18 or 34.
  explicit ResNet(const ResNetOptions& options);
  /// [B, in_channels, H, W] -> logits [B, num_classes]; any H, W >= 1 (adaptive average pool).
  /// Throws c10::Error when built without fc.
  at::Tensor forward(const at::Tensor& x);
  /// [B, in_channels, H, W] -> the outputs of layer1, layer2, layer3 and layer4, each block a
  /// checkpoint unit as in forward.
  std::vector<at::Tensor> stages(const at::Tensor& x);
  /// optim.layer_decay's ordering, timm's ResNet group_matcher: the stem (conv1, bn1) at depth 0,
  /// then every residual block ("layer1.0", "layer1.1", ...) one deeper; fc is the head.
  std::vector<tp::cpp::LayerDepth> layer_depths() const;
  /// Every residual block's drop-path rate, in order (layer1.0 first): timm's list.
  std::vector<double> drop_path_rates() const;

 private:
  /// Appends layer`index` (1..4) of `blocks` blocks with `planes` planes; the first has `stride`,
  /// or, with `dilate`, stride 1 and the stage's dilation grows by `stride` (torchvision's
  /// _make_layer: the first block keeps the previous dilation, the others take the new one).
  /// Block k of the network (blocks_.size() when it is made) gets timm's rate (drop_path_rate_).
  void make_layer(int index, int64_t planes, int64_t blocks, int64_t stride, bool dilate);
  /// conv1 - bn1 - ReLU - maxpool 3x3/2.
  at::Tensor stem(const at::Tensor& x);

  bool bottleneck_;
  bool fused_norm_;
  double drop_path_rate_;    // ResNetOptions::drop_path_rate
  int64_t total_blocks_ = 0; // over the four stages, for the drop-path rule
  int64_t in_planes_ = 64;
  int64_t dilation_ = 1;  // of the stage being built
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr};
  std::vector<std::shared_ptr<ResidualBlock>> blocks_;  // every block of layer1..layer4, in order
  std::vector<std::string> block_names_;               // their prefixes, "layer1.0", ...
  std::vector<size_t> stage_ends_;                     // blocks_ index one past each stage's last
  torch::nn::Linear fc_{nullptr};
};

}  // namespace tp::resnet
