// org.torchhost.segmentation: torchvision 0.29's semantic segmentation models as one
// torch::nn::Module, built on the zoo's backbones (plugins/models/resnet: ResNet-50 with
// replace_stride_with_dilation [false, true, true]; plugins/models/efficientnet: MobileNetV3-Large
// features with dilated=True) and heads.h.
//
// The module tree mirrors torchvision's, so the state names are its state_dict keys:
// "backbone.<...>" (the ResNet without fc, "backbone.layer1.0.conv1.weight"; or MobileNetV3's
// features, "backbone.4.block.2.fc1.weight"), "classifier.<...>" and, with aux_loss,
// "aux_classifier.<...>". A torchvision model's `torch.save(model.state_dict())` loads through
// train.init_weights unchanged.
//
// Activation checkpointing: the backbone's units (the ResNet's stem and residual blocks,
// MobileNetV3's stem, blocks and last conv); the heads run as they are. Layer depths
// (optim.layer_decay): the backbone's, under "backbone."; both heads are the head.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "efficientnet/mobilenet_v3_net.h"
#include "heads.h"
#include "resnet/resnet_net.h"
#include "tp/cpp/activation_checkpoint.h"
#include "tp/cpp/model_adapter.h"

namespace tp::segmentation {

/// torchvision's four builders.
enum class Arch { kFcnResNet50, kDeepLabV3ResNet50, kDeepLabV3MobileNetV3Large, kLRASPPMobileNetV3Large };

/// `name` ("fcn_resnet50", "deeplabv3_resnet50", "deeplabv3_mobilenet_v3_large",
/// "lraspp_mobilenet_v3_large") as an Arch; false for any other name.
bool parse_arch(const std::string& name, Arch& out);

/// What the config chooses.
struct SegmentationOptions {
  Arch arch = Arch::kLRASPPMobileNetV3Large;
  int64_t num_classes = 21;
  int64_t in_channels = 3;
  /// torchvision's aux_loss: an FCNHead on the backbone's stride-8 map (ResNet's layer3,
  /// MobileNetV3's C2 stage), output "aux". Not for LRASPP (torchvision refuses it too).
  bool aux_loss = false;
};

/// forward's logits, both [B, num_classes, H, W] at the input's size.
struct SegmentationOutputs {
  at::Tensor out;
  at::Tensor aux;  ///< undefined without aux_loss
};

/// torchvision.models.segmentation.<arch>(weights=None, weights_backbone=None, num_classes,
/// aux_loss), with a configurable number of input channels. Initialised as torchvision: the
/// backbone as its classifier (kaiming_normal_(fan_out) convolutions, BatchNorm weight 1, bias
/// 0), the heads PyTorch's defaults. Reproducible from the host's seed, not torchvision's draws.
class SegmentationNet : public torch::nn::Module, public tp::cpp::Checkpointable {
 public:
  /// The options must be valid (positive counts, no aux_loss with LRASPP; the plugin validates).
  explicit SegmentationNet(const SegmentationOptions& options);
  /// [B, in_channels, H, W] -> logits upsampled bilinearly (align_corners=False) to H x W. In
  /// training mode the ASPP pooling branch's BatchNorm needs B >= 2 (DeepLabV3), as in torchvision.
  SegmentationOutputs forward(const at::Tensor& x);
  /// The backbone's units are the checkpoint units.
  void set_activation_checkpointing(bool enabled) override;
  /// The backbone's depths under "backbone." (stem 0, every block one deeper); the heads unclaimed.
  std::vector<tp::cpp::LayerDepth> layer_depths() const;

 private:
  /// (the stride-8 map, the last map): ResNet's layer3 and layer4, MobileNetV3's C2 and C5.
  std::pair<at::Tensor, at::Tensor> backbone_maps(const at::Tensor& x);

  std::shared_ptr<resnet::ResNet> resnet_;                       // one of the two backbones
  std::shared_ptr<efficientnet::MobileNetV3Features> mobilenet_;
  size_t low_index_ = 0, high_index_ = 0;                         // MobileNetV3's features indices
  torch::nn::Sequential classifier_{nullptr};                     // FCN and DeepLabV3
  std::shared_ptr<LRASPPHead> lraspp_;                            // LRASPP's classifier
  torch::nn::Sequential aux_classifier_{nullptr};
};

}  // namespace tp::segmentation
