// org.torchhost.efficientnet: torchvision's EfficientNet-B0..B7 as a torch::nn::Module.
//
// The module tree mirrors torchvision.models.efficientnet, so the state names are torchvision's
// state_dict keys ("features.0.0.weight", "features.1.0.block.1.fc1.bias",
// "features.8.1.running_var", "classifier.1.weight"): torchvision weights load through
// train.init_weights unchanged.
//
// Activation checkpointing: the stem, every MBConv block and the last 1x1 conv are checkpoint
// units. Layer depths (optim.layer_decay, timm's grouping): the stem at 0, every block one deeper,
// the last conv with the last block, the classifier the head.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "blocks.h"
#include "tp/cpp/activation_checkpoint.h"
#include "tp/cpp/model_adapter.h"

namespace tp::efficientnet {

/// One variant's scaling, as torchvision's efficientnet_b<n> builders fix it.
struct EfficientNetVariant {
  const char* name;    ///< "b0".."b7"
  double width_mult;
  double depth_mult;
  double dropout;      ///< torchvision's default classifier dropout
  NormOptions norm;    ///< B0-B4 BatchNorm2d's defaults; B5-B7 eps 1e-3, momentum 0.01
};

/// The variant named `name`, or nullptr.
const EfficientNetVariant* find_efficientnet_variant(const std::string& name);

/// What the config chooses.
struct EfficientNetOptions {
  std::string variant = "b0";
  int64_t num_classes = 1000;
  int64_t in_channels = 3;
  double dropout = 0.2;
  double stochastic_depth_prob = 0.2;
  bool fused_norm = false;  ///< NormOptions::fused for every BatchNorm
};

/// The MBConv blocks of a configuration, stage by stage, with their stochastic depth
/// probability: torchvision's `stochastic_depth_prob * stage_block_id / total_stage_blocks`,
/// growing linearly from 0 at the first block.
std::vector<std::vector<InvertedResidualSpec>> efficientnet_stages(const EfficientNetVariant& variant,
                                                                   double stochastic_depth_prob);

/// torchvision.models.efficientnet_b<n>(num_classes, dropout, stochastic_depth_prob), with a
/// configurable number of input channels. Initialised as torchvision: convolutions
/// kaiming_normal_(fan_out), BatchNorm weight 1 and bias 0, the Linear U(-r, r) with
/// r = 1/sqrt(num_classes) and bias 0.
class EfficientNet : public FeatureNet {
 public:
  /// `options.variant` must name a variant and the others be valid (the plugin validates them).
  explicit EfficientNet(const EfficientNetOptions& options);
  /// [B, in_channels, H, W] -> logits [B, num_classes]; any H, W >= 1 (adaptive average pool).
  at::Tensor forward(const at::Tensor& x);
  /// optim.layer_decay's ordering, timm's: "features.0" at 0, each "features.<stage>.<block>" one
  /// deeper in order, the last conv at the last block's depth; the classifier is the head.
  std::vector<tp::cpp::LayerDepth> layer_depths() const;

 private:
  std::vector<std::string> block_names_;  // the blocks' prefixes, "features.1.0", ...
  std::string head_conv_name_;                            // "features.<stages + 1>"
  torch::nn::Dropout dropout_{nullptr};
  torch::nn::Linear fc_{nullptr};
};

}  // namespace tp::efficientnet
