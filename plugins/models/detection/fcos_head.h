// detection: torchvision's FCOSHead (models/detection/fcos.py): a classification branch and a
// regression branch (box distances and centre-ness), each `num_convs` x (3x3 conv - GroupNorm(32)
// - ReLU) shared by every pyramid level. State names are torchvision's:
// "classification_head.conv.0.weight", "classification_head.conv.1.weight" (GroupNorm),
// "classification_head.cls_logits.bias", "regression_head.bbox_reg.weight",
// "regression_head.bbox_ctrness.bias".
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include <cstdint>
#include <vector>

namespace tp::detection {

/// The head's outputs, the levels concatenated (A = sum of H_l * W_l, one point per location).
struct HeadOutputs {
  at::Tensor cls_logits;       ///< [B, A, num_classes]
  at::Tensor bbox_regression;  ///< [B, A, 4], >= 0 (ReLU): left, top, right, bottom in anchor sizes
  at::Tensor bbox_ctrness;     ///< [B, A, 1] centre-ness logits
};

/// FCOSClassificationHead(channels, 1, num_classes, num_convs): tower convs normal(std 0.01) with
/// bias 0; cls_logits normal(std 0.01) with the prior bias -log((1 - 0.01) / 0.01).
class FcosClassificationHead : public torch::nn::Module {
 public:
  FcosClassificationHead(int64_t channels, int64_t num_classes, int64_t num_convs);
  /// Per level [B, channels, H, W] -> [B, sum H W, num_classes].
  at::Tensor forward(const std::vector<at::Tensor>& levels);

 private:
  int64_t num_classes_;
  torch::nn::Sequential conv_{nullptr};
  torch::nn::Conv2d cls_logits_{nullptr};
};

/// FCOSRegressionHead(channels, 1, num_convs): every conv normal(std 0.01) with bias 0.
class FcosRegressionHead : public torch::nn::Module {
 public:
  FcosRegressionHead(int64_t channels, int64_t num_convs);
  /// Per level [B, channels, H, W] -> {relu(bbox_reg) [B, A, 4], bbox_ctrness [B, A, 1]}.
  std::pair<at::Tensor, at::Tensor> forward(const std::vector<at::Tensor>& levels);

 private:
  torch::nn::Sequential conv_{nullptr};
  torch::nn::Conv2d bbox_reg_{nullptr}, bbox_ctrness_{nullptr};
};

/// FCOSHead: "classification_head" and "regression_head".
class FcosHead : public torch::nn::Module {
 public:
  FcosHead(int64_t channels, int64_t num_classes, int64_t num_convs);
  /// Per level [B, channels, H, W], P3 first -> the branches' outputs, levels concatenated.
  HeadOutputs forward(const std::vector<at::Tensor>& levels);

 private:
  std::shared_ptr<FcosClassificationHead> classification_;
  std::shared_ptr<FcosRegressionHead> regression_;
};

}  // namespace tp::detection
