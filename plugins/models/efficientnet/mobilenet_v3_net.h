// org.torchhost.mobilenet_v3: torchvision's MobileNetV3-Small and -Large as a torch::nn::Module.
//
// The module tree mirrors torchvision.models.mobilenetv3 (width_mult 1.0, no reduced tail), so
// the state names are torchvision's state_dict keys ("features.0.0.weight",
// "features.4.block.2.fc1.weight", "classifier.0.weight", "classifier.3.bias").
// MobileNetV3Features is torchvision's `features` on its own, with its `dilated` option: the
// backbone of the segmentation models (plugins/models/segmentation), whose keys drop "features."
// ("backbone.4.block.2.fc1.weight").
//
// Activation checkpointing: the stem, every inverted residual block and the last 1x1 conv are
// checkpoint units. Layer depths (optim.layer_decay): the stem at 0, every block one deeper, the
// last conv one deeper still, the classifier the head.
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

/// What the config chooses.
struct MobileNetV3Options {
  std::string variant = "large";  ///< "small" | "large"
  int64_t num_classes = 1000;
  int64_t in_channels = 3;
  double dropout = 0.2;
  /// torchvision's `dilated`: the blocks from the last strided one on (the C4 stage) dilate their
  /// depthwise convolution by 2 instead of striding, so the output stride is 16, not 32.
  bool dilated = false;
  bool fused_norm = false;  ///< NormOptions::fused for every BatchNorm
};

/// torchvision's mobilenet_v3_{small,large}(dilated=...).features: children "0" (stem) ..
/// "<blocks + 1>" (last conv), each a checkpoint unit. Constructed with LibTorch's default
/// initialisation; its owner applies torchvision's (init_convs_and_norms), so that a classifier
/// keeps torchvision's order of construction and initialisation.
class MobileNetV3Features : public FeatureNet {
 public:
  /// `options.variant` "small" or "large"; num_classes and dropout are not read.
  explicit MobileNetV3Features(const MobileNetV3Options& options);
  /// [B, in_channels, H, W] -> the last conv's map [B, 6 * last block's channels, H', W'].
  at::Tensor forward(const at::Tensor& x) const { return features(x); }
  /// torchvision's stage_indices in the segmentation builders: 0, every block built with stride 2
  /// (`_is_cn`, dilated or not), and the last conv.
  std::vector<size_t> stage_indices() const { return stage_indices_; }
  /// The channels of features.<index>'s output.
  int64_t channels(size_t index) const { return channels_.at(index); }
  /// "features.0" at 0, "features.1" at 1, ...: every unit one deeper, `prefix` before the index.
  std::vector<tp::cpp::LayerDepth> layer_depths(const std::string& prefix) const;

 private:
  std::vector<size_t> stage_indices_;
  std::vector<int64_t> channels_;  // per features index
};

/// torchvision.models.mobilenet_v3_{small,large}(num_classes, dropout), with a configurable
/// number of input channels. BatchNorm eps 1e-3, momentum 0.01. Initialised as torchvision:
/// convolutions kaiming_normal_(fan_out), BatchNorm weight 1 and bias 0, Linear weights
/// N(0, 0.01) and biases 0.
class MobileNetV3 : public torch::nn::Module, public tp::cpp::Checkpointable {
 public:
  /// `options.variant` must be "small" or "large" and the others valid (the plugin validates).
  explicit MobileNetV3(const MobileNetV3Options& options);
  /// [B, in_channels, H, W] -> logits [B, num_classes]; any H, W >= 1 (adaptive average pool).
  at::Tensor forward(const at::Tensor& x);
  /// optim.layer_decay's ordering: "features.0" at 0, "features.1", "features.2", ... one deeper
  /// each, up to the last conv; the classifier is the head.
  std::vector<tp::cpp::LayerDepth> layer_depths() const { return features_->layer_depths("features."); }
  /// The features' units are the checkpoint units.
  void set_activation_checkpointing(bool enabled) override;

 private:
  std::shared_ptr<MobileNetV3Features> features_;
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

}  // namespace tp::efficientnet
