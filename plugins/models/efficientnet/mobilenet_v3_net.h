// org.torchhost.mobilenet_v3: torchvision's MobileNetV3-Small and -Large as a torch::nn::Module.
//
// The module tree mirrors torchvision.models.mobilenetv3 (width_mult 1.0, no reduced tail, no
// dilation), so the state names are torchvision's state_dict keys ("features.0.0.weight",
// "features.4.block.2.fc1.weight", "classifier.0.weight", "classifier.3.bias").
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
};

/// torchvision.models.mobilenet_v3_{small,large}(num_classes, dropout), with a configurable
/// number of input channels. BatchNorm eps 1e-3, momentum 0.01. Initialised as torchvision:
/// convolutions kaiming_normal_(fan_out), BatchNorm weight 1 and bias 0, Linear weights
/// N(0, 0.01) and biases 0.
class MobileNetV3 : public FeatureNet {
 public:
  /// `options.variant` must be "small" or "large" and the others valid (the plugin validates).
  explicit MobileNetV3(const MobileNetV3Options& options);
  /// [B, in_channels, H, W] -> logits [B, num_classes]; any H, W >= 1 (adaptive average pool).
  at::Tensor forward(const at::Tensor& x);
  /// optim.layer_decay's ordering: "features.0" at 0, "features.1", "features.2", ... one deeper
  /// each, up to the last conv; the classifier is the head.
  std::vector<tp::cpp::LayerDepth> layer_depths() const;

 private:
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

}  // namespace tp::efficientnet
