// detection: FCOS's head, following torchvision/models/detection/fcos.py (fcos_head.h).
#include "fcos_head.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/relu.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>
#include <memory>
#include <utility>

namespace tp::detection {
namespace {

using torch::nn::Conv2d;
using torch::nn::Conv2dOptions;

/// A biased 3x3 conv, stride 1, padding 1, weight normal(std 0.01), bias `bias`.
Conv2d head_conv(int64_t in, int64_t out, double bias) {
  Conv2d conv(Conv2dOptions(in, out, 3).padding(1));
  torch::NoGradGuard no_grad;
  torch::nn::init::normal_(conv->weight, 0.0, 0.01);
  conv->bias.fill_(bias);
  return conv;
}

/// num_convs x (conv3x3 - GroupNorm(32, channels) - ReLU): indices 0, 1, 2, 3, ...
torch::nn::Sequential tower(int64_t channels, int64_t num_convs) {
  torch::nn::Sequential s;
  for (int64_t i = 0; i < num_convs; ++i) {
    s->push_back(head_conv(channels, channels, 0.0));
    s->push_back(torch::nn::GroupNorm(torch::nn::GroupNormOptions(32, channels)));
    s->push_back(torch::nn::ReLU());
  }
  return s;
}

/// torchvision's permute of a level's map: [N, A * C, H, W] -> [N, H W A, C] (A = 1 here).
at::Tensor flatten_level(const at::Tensor& map, int64_t channels) {
  const int64_t n = map.size(0), h = map.size(2), w = map.size(3);
  return map.view({n, -1, channels, h, w}).permute({0, 3, 4, 1, 2}).reshape({n, -1, channels});
}

/// The tower applied to `x`; torchvision's empty Sequential (num_convs 0) is the identity.
at::Tensor run_tower(torch::nn::Sequential& tower, const at::Tensor& x) {
  return tower->is_empty() ? x : tower->forward(x);
}

}  // namespace

FcosClassificationHead::FcosClassificationHead(int64_t channels, int64_t num_classes, int64_t num_convs)
    : num_classes_(num_classes) {
  constexpr double kPriorProbability = 0.01;
  conv_ = register_module("conv", tower(channels, num_convs));
  cls_logits_ = register_module(
      "cls_logits", head_conv(channels, num_classes, -std::log((1 - kPriorProbability) / kPriorProbability)));
}

at::Tensor FcosClassificationHead::forward(const std::vector<at::Tensor>& levels) {
  std::vector<at::Tensor> all;
  for (const at::Tensor& features : levels)
    all.push_back(flatten_level(cls_logits_->forward(run_tower(conv_, features)), num_classes_));
  return at::cat(all, 1);
}

FcosRegressionHead::FcosRegressionHead(int64_t channels, int64_t num_convs) {
  conv_ = register_module("conv", tower(channels, num_convs));
  bbox_reg_ = register_module("bbox_reg", head_conv(channels, 4, 0.0));
  bbox_ctrness_ = register_module("bbox_ctrness", head_conv(channels, 1, 0.0));
}

std::pair<at::Tensor, at::Tensor> FcosRegressionHead::forward(const std::vector<at::Tensor>& levels) {
  std::vector<at::Tensor> regression, ctrness;
  for (const at::Tensor& features : levels) {
    const at::Tensor tower_out = run_tower(conv_, features);
    regression.push_back(flatten_level(at::relu(bbox_reg_->forward(tower_out)), 4));
    ctrness.push_back(flatten_level(bbox_ctrness_->forward(tower_out), 1));
  }
  return {at::cat(regression, 1), at::cat(ctrness, 1)};
}

FcosHead::FcosHead(int64_t channels, int64_t num_classes, int64_t num_convs)
    : classification_(register_module("classification_head",
                                      std::make_shared<FcosClassificationHead>(channels, num_classes, num_convs))),
      regression_(register_module("regression_head", std::make_shared<FcosRegressionHead>(channels, num_convs))) {}

HeadOutputs FcosHead::forward(const std::vector<at::Tensor>& levels) {
  HeadOutputs out;
  out.cls_logits = classification_->forward(levels);
  std::tie(out.bbox_regression, out.bbox_ctrness) = regression_->forward(levels);
  return out;
}

}  // namespace tp::detection
