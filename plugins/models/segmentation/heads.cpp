// segmentation: the heads, following torchvision/models/segmentation/{fcn,deeplabv3,lraspp}.py.
#include "heads.h"

#include <ATen/ops/adaptive_avg_pool2d.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/upsample_bilinear2d.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>

namespace tp::segmentation {
namespace {

using torch::nn::BatchNorm2d;
using torch::nn::Conv2d;
using torch::nn::Conv2dOptions;

/// Conv2d(in, out, kernel, padding = dilation * (kernel / 2), dilation) without bias: a
/// BatchNorm follows every one.
Conv2d conv_no_bias(int64_t in, int64_t out, int64_t kernel, int64_t dilation = 1) {
  return Conv2d(Conv2dOptions(in, out, kernel).padding(kernel / 2 * dilation).dilation(dilation).bias(false));
}

/// conv - BN - ReLU, torchvision's ASPP branches (an nn.Sequential of the three).
torch::nn::Sequential conv_norm_relu(int64_t in, int64_t out, int64_t kernel, int64_t dilation = 1) {
  return torch::nn::Sequential(conv_no_bias(in, out, kernel, dilation), BatchNorm2d(out), torch::nn::ReLU());
}

}  // namespace

at::Tensor upsample(const at::Tensor& x, at::IntArrayRef size) {
  // F.interpolate(size=..., mode="bilinear", align_corners=False) calls this op with no scales.
  return at::upsample_bilinear2d(x, size, /*align_corners=*/false);
}

torch::nn::Sequential fcn_head(int64_t in_channels, int64_t channels) {
  const int64_t inter = in_channels / 4;
  return torch::nn::Sequential(conv_no_bias(in_channels, inter, 3), BatchNorm2d(inter), torch::nn::ReLU(),
                               torch::nn::Dropout(0.1), Conv2d(Conv2dOptions(inter, channels, 1)));
}

torch::nn::Sequential deeplab_head(int64_t in_channels, int64_t num_classes) {
  return torch::nn::Sequential(std::make_shared<ASPP>(in_channels, std::vector<int64_t>{12, 24, 36}),
                               conv_no_bias(256, 256, 3), BatchNorm2d(256), torch::nn::ReLU(),
                               Conv2d(Conv2dOptions(256, num_classes, 1)));
}

ASPPPooling::ASPPPooling(int64_t in_channels, int64_t out_channels) {
  // "0" is nn.AdaptiveAvgPool2d(1) and "3" nn.ReLU: no state, so functions here.
  conv_ = register_module("1", conv_no_bias(in_channels, out_channels, 1));
  norm_ = register_module("2", BatchNorm2d(out_channels));
}

at::Tensor ASPPPooling::forward(const at::Tensor& x) {
  const at::Tensor pooled = at::relu(norm_->forward(conv_->forward(at::adaptive_avg_pool2d(x, {1, 1}))));
  return upsample(pooled, x.sizes().slice(2));
}

ASPP::ASPP(int64_t in_channels, const std::vector<int64_t>& atrous_rates, int64_t out_channels) {
  auto convs = register_module("convs", torch::nn::ModuleList());
  branches_.push_back(conv_norm_relu(in_channels, out_channels, 1));
  for (const int64_t rate : atrous_rates) branches_.push_back(conv_norm_relu(in_channels, out_channels, 3, rate));
  for (const auto& branch : branches_) convs->push_back(branch);
  pooling_ = std::make_shared<ASPPPooling>(in_channels, out_channels);
  convs->push_back(pooling_);
  const auto branches = static_cast<int64_t>(branches_.size()) + 1;
  project_ = register_module("project", torch::nn::Sequential(conv_no_bias(branches * out_channels, out_channels, 1),
                                                              BatchNorm2d(out_channels), torch::nn::ReLU(),
                                                              torch::nn::Dropout(0.5)));
}

at::Tensor ASPP::forward(const at::Tensor& x) {
  std::vector<at::Tensor> maps;
  for (auto& branch : branches_) maps.push_back(branch->forward(x));
  maps.push_back(pooling_->forward(x));
  return project_->forward(at::cat(maps, 1));
}

LRASPPHead::LRASPPHead(int64_t low_channels, int64_t high_channels, int64_t num_classes, int64_t inter_channels) {
  cbr_ = register_module("cbr", conv_norm_relu(high_channels, inter_channels, 1));
  // scale = Sequential(AdaptiveAvgPool2d(1), Conv2d, Sigmoid): only "1" has state.
  auto scale = register_module("scale", std::make_shared<torch::nn::Module>());
  scale_conv_ = scale->register_module("1", conv_no_bias(high_channels, inter_channels, 1));
  low_classifier_ = register_module("low_classifier", Conv2d(Conv2dOptions(low_channels, num_classes, 1)));
  high_classifier_ = register_module("high_classifier", Conv2d(Conv2dOptions(inter_channels, num_classes, 1)));
}

at::Tensor LRASPPHead::forward(const at::Tensor& low, const at::Tensor& high) {
  const at::Tensor s = at::sigmoid(scale_conv_->forward(at::adaptive_avg_pool2d(high, {1, 1})));
  const at::Tensor x = upsample(cbr_->forward(high) * s, low.sizes().slice(2));
  return low_classifier_->forward(low) + high_classifier_->forward(x);
}

}  // namespace tp::segmentation
