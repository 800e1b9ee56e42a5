// org.torchhost.convnext: torchvision's ConvNeXt (tiny, small, base) as a torch::nn::Module.
//
// The module tree mirrors torchvision.models.convnext, so the state names are torchvision's
// state_dict keys ("features.0.0.weight", "features.1.0.layer_scale",
// "features.1.0.block.3.weight", "features.2.1.bias", "classifier.2.weight") and a torchvision
// checkpoint loads through train.init_weights unchanged:
//   features.0          stem: Conv2d 4x4/4 (biased) - LayerNorm2d
//   features.1,3,5,7    stages of CNBlocks
//   features.2,4,6      downsampling: LayerNorm2d - Conv2d 2x2/2
//   classifier          LayerNorm2d - Flatten - Linear (after the global average pool)
// The model has no buffers.
//
// Activation checkpointing: every CNBlock is a checkpoint unit (its stochastic-depth draw is
// replayed in the recompute, so the gradients are those of the uncheckpointed step).
//
// Layer depths (optim.layer_decay): the stem at 0, then every CNBlock and every downsampling layer
// one deeper, in the order the input meets them; the classifier (norm and linear) is the head.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tp/cpp/activation_checkpoint.h"
#include "tp/cpp/model_adapter.h"
#include "tp/cpp/model_layers.h"

namespace tp::convnext {

/// One stage of torchvision's CNBlockConfig: `blocks` CNBlocks of `channels` channels, then (when
/// `out_channels` is not 0) a downsampling layer to `out_channels`.
struct StageSetting {
  int64_t channels;
  int64_t out_channels;
  int64_t blocks;
};

/// What the config chooses.
struct ConvNeXtOptions {
  std::string variant = "tiny";        ///< "tiny" | "small" | "base"
  int64_t num_classes = 1000;
  int64_t in_channels = 3;             ///< torchvision fixes 3
  double stochastic_depth_prob = 0.1;  ///< of the last block; the others scale linearly from 0
  double layer_scale = 1e-6;           ///< initial value of every CNBlock's layer_scale
};

/// Whether `variant` is one this module builds.
bool is_variant(const std::string& variant);
/// torchvision's block_setting of convnext_<variant>; `variant` must be valid (is_variant).
std::vector<StageSetting> stage_settings(const std::string& variant);
/// torchvision's default stochastic_depth_prob of convnext_<variant>: tiny 0.1, small 0.4,
/// base 0.5.
double default_stochastic_depth_prob(const std::string& variant);

/// torchvision.ops.stochastic_depth(x, p, mode="row", training) (tp/cpp/model_layers.h).
using tp::cpp::stochastic_depth;

/// torchvision's LayerNorm2d: LayerNorm over the channels of an NCHW tensor (permuted to NHWC
/// and back), eps 1e-6, weight 1 and bias 0 initially.
class LayerNorm2dImpl : public torch::nn::Module {
 public:
  explicit LayerNorm2dImpl(int64_t channels);
  /// [N, C, H, W] -> [N, C, H, W].
  at::Tensor forward(const at::Tensor& x);

  at::Tensor weight;
  at::Tensor bias;
};
TORCH_MODULE(LayerNorm2d);

/// torchvision's CNBlock: depthwise 7x7 conv - (NHWC) LayerNorm - Linear(4x) - GELU - Linear -
/// (NCHW), times layer_scale, stochastic depth, plus the input. forward never modifies its input
/// in place, which a checkpoint unit requires.
class CNBlock : public torch::nn::Module {
 public:
  /// `drop_probability` is this block's stochastic-depth rate.
  CNBlock(int64_t channels, double layer_scale, double drop_probability);
  /// [N, C, H, W] -> [N, C, H, W].
  at::Tensor forward(const at::Tensor& x);
  double drop_probability() const noexcept { return drop_probability_; }

 private:
  torch::nn::Sequential block_{nullptr};  // "block.0" ... "block.6", torchvision's Sequential
  at::Tensor layer_scale_;                // [C, 1, 1]
  double drop_probability_;
};

/// torchvision.models.convnext_<variant>(num_classes=..., stochastic_depth_prob=...), with a
/// configurable number of input channels. Initialised as torchvision: every Conv2d and Linear
/// weight trunc_normal_(std=0.02) (cut at +-2, torch.nn.init's default), biases 0, LayerNorm
/// weight 1 and bias 0, layer_scale filled with `layer_scale`. The draws come from the global
/// generator in torchvision's order, so a seed gives torchvision's initial weights.
class ConvNeXt : public torch::nn::Module, public tp::cpp::Checkpointable {
 public:
  /// `options.variant` must be valid and the others in range (the plugin validates them).
  explicit ConvNeXt(const ConvNeXtOptions& options);
  /// [B, in_channels, H, W] -> logits [B, num_classes]; H, W >= 32 (four stride-2+ reductions,
  /// 32 in all; the pool is adaptive).
  at::Tensor forward(const at::Tensor& x);
  /// optim.layer_decay's ordering: "features.0" at 0, then every CNBlock ("features.1.0", ...)
  /// and downsampling layer ("features.2", ...) one deeper; the classifier is the head.
  std::vector<tp::cpp::LayerDepth> layer_depths() const;
  /// Every CNBlock's stochastic-depth rate, in order: stochastic_depth_prob * i / (blocks - 1).
  std::vector<double> drop_probabilities() const;

 private:
  torch::nn::Sequential stem_{nullptr};                   // features.0
  std::vector<std::vector<std::shared_ptr<CNBlock>>> stages_;  // features.1, .3, .5, .7
  std::vector<torch::nn::Sequential> downsample_;         // features.2, .4, .6
  torch::nn::Sequential classifier_{nullptr};
  std::vector<tp::cpp::LayerDepth> depths_;               // layer_depths(), fixed at construction
};

}  // namespace tp::convnext
