// segmentation: the heads of torchvision 0.29's segmentation models (fcn.py FCNHead, deeplabv3.py
// DeepLabHead / ASPP / ASPPConv / ASPPPooling, lraspp.py LRASPPHead), with torchvision's child
// names, so their state names are torchvision's state_dict keys below "classifier." and
// "aux_classifier." ("0.convs.4.1.weight", "cbr.1.running_var", "high_classifier.bias").
// Layers without state (ReLU, Dropout) sit at torchvision's indices too. torchvision does not
// re-initialise its heads, so they keep PyTorch's defaults, which LibTorch's modules draw alike.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include <cstdint>
#include <vector>

namespace tp::segmentation {

/// `x` resized to `size` ({H, W}) as torchvision's F.interpolate(mode="bilinear",
/// align_corners=False) does.
at::Tensor upsample(const at::Tensor& x, at::IntArrayRef size);

/// torchvision's FCNHead(in_channels, channels): "0" Conv2d(in, in / 4, 3, padding 1, no bias),
/// "1" BatchNorm2d, "2" ReLU, "3" Dropout(0.1), "4" Conv2d(in / 4, channels, 1).
torch::nn::Sequential fcn_head(int64_t in_channels, int64_t channels);

/// torchvision's DeepLabHead(in_channels, num_classes) with its atrous rates (12, 24, 36): "0"
/// ASPP, "1" Conv2d(256, 256, 3, padding 1, no bias), "2" BatchNorm2d, "3" ReLU, "4"
/// Conv2d(256, num_classes, 1).
torch::nn::Sequential deeplab_head(int64_t in_channels, int64_t num_classes);

/// torchvision's ASPPPooling: global average pool, "1" Conv2d(in, out, 1, no bias), "2"
/// BatchNorm2d, ReLU, then bilinear back to the input's size. In training mode BatchNorm sees one
/// value per channel and image, so it needs a batch of at least 2 (as in torchvision).
class ASPPPooling : public torch::nn::Module {
 public:
  ASPPPooling(int64_t in_channels, int64_t out_channels);
  at::Tensor forward(const at::Tensor& x);

 private:
  torch::nn::Conv2d conv_{nullptr};
  torch::nn::BatchNorm2d norm_{nullptr};
};

/// torchvision's ASPP(in_channels, atrous_rates, 256): "convs" = [1x1 conv-BN-ReLU, one 3x3
/// conv-BN-ReLU per rate (dilation = padding = rate), ASPPPooling], concatenated and projected by
/// "project" = [Conv2d(5 * 256, 256, 1, no bias), BatchNorm2d, ReLU, Dropout(0.5)].
class ASPP : public torch::nn::Module {
 public:
  ASPP(int64_t in_channels, const std::vector<int64_t>& atrous_rates, int64_t out_channels = 256);
  at::Tensor forward(const at::Tensor& x);

 private:
  std::vector<torch::nn::Sequential> branches_;  // convs.0 .. convs.<rates>
  std::shared_ptr<ASPPPooling> pooling_;         // the last of "convs"
  torch::nn::Sequential project_{nullptr};
};

/// torchvision's LRASPPHead(low_channels, high_channels, num_classes, inter_channels):
/// low_classifier(low) + high_classifier(upsample(cbr(high) * scale(high), low's size)), where
/// "cbr" = [Conv2d(high, inter, 1, no bias), BatchNorm2d, ReLU] and "scale" = [global average
/// pool, "1" Conv2d(high, inter, 1, no bias), Sigmoid].
class LRASPPHead : public torch::nn::Module {
 public:
  LRASPPHead(int64_t low_channels, int64_t high_channels, int64_t num_classes, int64_t inter_channels);
  /// `low` (output stride 8) and `high` (output stride 16) -> logits at low's resolution.
  at::Tensor forward(const at::Tensor& low, const at::Tensor& high);

 private:
  torch::nn::Sequential cbr_{nullptr};
  torch::nn::Conv2d scale_conv_{nullptr};
  torch::nn::Conv2d low_classifier_{nullptr}, high_classifier_{nullptr};
};

}  // namespace tp::segmentation
