// org.torchhost.fcos: torchvision 0.29's FCOS (models/detection/fcos.py) as one torch::nn::Module:
// the ResNet-FPN backbone (fpn.h) and the FCOS head (fcos_head.h), applied to a batch already
// normalised and padded to a multiple of 32. torchvision's GeneralizedRCNNTransform (normalise,
// resize, pad) is split: the dataset normalises and resizes, the component (fcos_model.h) pads.
//
// State names are torchvision's state_dict keys: "backbone.body.conv1.weight",
// "backbone.fpn.extra_blocks.p7.bias", "head.classification_head.cls_logits.bias",
// "head.regression_head.bbox_ctrness.weight"; fcos_resnet50_fpn's state_dict loads unchanged.
//
// Activation checkpointing: the ResNet's units (stem and residual blocks); the FPN and the head
// run as they are. Layer depths (optim.layer_decay): the ResNet's under "backbone.body."; the FPN
// and the head are the head.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fcos_head.h"
#include "fpn.h"
#include "tp/cpp/activation_checkpoint.h"
#include "tp/cpp/model_adapter.h"

namespace tp::detection {

/// What the config chooses (detection_plugin.cpp validates it).
struct FcosOptions {
  int64_t depth = 50;          ///< the ResNet: 18, 34 or 50
  int64_t num_classes = 91;    ///< logits per location; labels index them, no background class
  int64_t in_channels = 3;
  int64_t fpn_channels = 256;  ///< a multiple of 32 (the head's GroupNorm(32))
  int64_t head_convs = 4;      ///< FCOSHead's num_convs
};

/// One forward: the head's outputs and what post-processing and the loss read with them.
struct FcosForward {
  HeadOutputs head;
  at::Tensor anchors;                          ///< [A, 4], anchors.h
  std::vector<int64_t> num_anchors_per_level;  ///< H_l * W_l, P3 first
};

/// fcos_resnet50_fpn(weights=None, weights_backbone=None, num_classes) for depth 50 and the
/// defaults; other depths are torchvision's _resnet_fpn_extractor(resnet18/34, 5, [2, 3, 4],
/// LastLevelP6P7) with a `fpn_channels`-wide pyramid, as an FCOS built on them. Initialised as
/// torchvision (fpn.h, fcos_head.h; the ResNet kaiming_normal_(fan_out), BatchNorm 1 and 0),
/// reproducible from the host's seed, not torchvision's draws.
class FcosNet : public torch::nn::Module, public tp::cpp::Checkpointable {
 public:
  explicit FcosNet(const FcosOptions& options);
  /// `images` [B, in_channels, H, W], H and W multiples of 32 (GeneralizedRCNNTransform's
  /// size_divisible) -> the head's outputs over P3 .. P7 and their anchors.
  FcosForward forward(const at::Tensor& images);
  /// The ResNet's units (stem, residual blocks); the FPN and the head run as they are.
  void set_activation_checkpointing(bool enabled) override;
  /// The ResNet's depths under "backbone.body." (stem 0, each block one deeper).
  std::vector<tp::cpp::LayerDepth> layer_depths() const;

 private:
  std::shared_ptr<ResNetFpn> backbone_;
  std::shared_ptr<FcosHead> head_;
};

}  // namespace tp::detection
