// detection: torchvision's BackboneWithFPN as FCOS builds it (models/detection/backbone_utils.py
// _resnet_fpn_extractor with returned_layers [2, 3, 4] and LastLevelP6P7): the zoo's ResNet
// without fc as "body" (torchvision's IntermediateLayerGetter keeps conv1 .. layer4), a
// FeaturePyramidNetwork over layer2, layer3 and layer4 as "fpn", and P6 / P7 from P5 as
// "fpn.extra_blocks". State names are torchvision's: "body.layer1.0.conv1.weight",
// "fpn.inner_blocks.0.0.weight", "fpn.layer_blocks.2.0.bias", "fpn.extra_blocks.p6.weight".
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "resnet/resnet_net.h"

namespace tp::detection {

/// torchvision's LastLevelP6P7(channels, channels): P6 = conv3x3/2(P5), P7 = conv3x3/2(relu(P6)).
/// in_channels == out_channels, so it reads P5 (torchvision's use_P5), not C5.
class LastLevelP6P7 : public torch::nn::Module {
 public:
  explicit LastLevelP6P7(int64_t channels);
  /// {P6, P7} from P5.
  std::vector<at::Tensor> forward(const at::Tensor& p5);

 private:
  torch::nn::Conv2d p6_{nullptr}, p7_{nullptr};
};

/// torchvision's FeaturePyramidNetwork(in_channels_list, out_channels, LastLevelP6P7) without a
/// norm layer: a biased 1x1 lateral conv per input ("inner_blocks.<i>.0"), nearest-neighbour
/// top-down addition, a biased 3x3 output conv per level ("layer_blocks.<i>.0"), then P6 and P7.
/// Every conv kaiming_uniform_(a=1) with bias 0, as torchvision.
class FeaturePyramidNetwork : public torch::nn::Module {
 public:
  FeaturePyramidNetwork(const std::vector<int64_t>& in_channels, int64_t out_channels);
  /// The input maps, finest first -> their outputs, finest first, then P6 and P7.
  std::vector<at::Tensor> forward(const std::vector<at::Tensor>& maps);

 private:
  torch::nn::ModuleList inner_blocks_, layer_blocks_;
  std::vector<torch::nn::Conv2d> inner_, layer_;  // the conv of each block
  std::shared_ptr<LastLevelP6P7> extra_blocks_;
};

/// BackboneWithFPN: "body" (ResNet-`depth`, torchvision's initialisation, BatchNorm2d) and "fpn".
class ResNetFpn : public torch::nn::Module {
 public:
  /// `depth` 18, 34 or 50; `fpn_channels` the pyramid's width.
  ResNetFpn(int64_t depth, int64_t in_channels, int64_t fpn_channels);
  /// [B, in_channels, H, W] -> P3 .. P7 (strides 8 .. 128 for H, W multiples of 128).
  std::vector<at::Tensor> forward(const at::Tensor& x);
  /// The ResNet ("body"), for its checkpointing switch and layer depths.
  resnet::ResNet& body() { return *body_; }
  const resnet::ResNet& body() const { return *body_; }

 private:
  std::shared_ptr<resnet::ResNet> body_;
  std::shared_ptr<FeaturePyramidNetwork> fpn_;
};

}  // namespace tp::detection
