// detection: the ResNet-FPN backbone, following torchvision/ops/feature_pyramid_network.py and
// models/detection/backbone_utils.py (fpn.h).
#include "fpn.h"

#include <ATen/ops/relu.h>
#include <ATen/ops/upsample_nearest2d.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/container/sequential.h>

#include <utility>

namespace tp::detection {
namespace {

using torch::nn::Conv2d;
using torch::nn::Conv2dOptions;

/// A biased conv with torchvision's FPN initialisation: kaiming_uniform_(a=1), bias 0.
Conv2d fpn_conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  Conv2d conv(Conv2dOptions(in, out, kernel).stride(stride).padding((kernel - 1) / 2));
  torch::NoGradGuard no_grad;
  torch::nn::init::kaiming_uniform_(conv->weight, /*a=*/1);
  conv->bias.zero_();
  return conv;
}

}  // namespace

LastLevelP6P7::LastLevelP6P7(int64_t channels)
    : p6_(register_module("p6", fpn_conv(channels, channels, 3, 2))),
      p7_(register_module("p7", fpn_conv(channels, channels, 3, 2))) {}

std::vector<at::Tensor> LastLevelP6P7::forward(const at::Tensor& p5) {
  at::Tensor p6 = p6_->forward(p5);
  at::Tensor p7 = p7_->forward(at::relu(p6));
  return {std::move(p6), std::move(p7)};
}

FeaturePyramidNetwork::FeaturePyramidNetwork(const std::vector<int64_t>& in_channels, int64_t out_channels)
    : inner_blocks_(register_module("inner_blocks", torch::nn::ModuleList())),
      layer_blocks_(register_module("layer_blocks", torch::nn::ModuleList())) {
  // Conv2dNormActivation(norm_layer=None, activation_layer=None): a Sequential holding the conv
  // alone, hence the ".0" in the state names.
  for (const int64_t in : in_channels) {
    inner_.push_back(fpn_conv(in, out_channels, 1, 1));
    layer_.push_back(fpn_conv(out_channels, out_channels, 3, 1));
    inner_blocks_->push_back(torch::nn::Sequential(inner_.back()));
    layer_blocks_->push_back(torch::nn::Sequential(layer_.back()));
  }
  extra_blocks_ = register_module("extra_blocks", std::make_shared<LastLevelP6P7>(out_channels));
}

std::vector<at::Tensor> FeaturePyramidNetwork::forward(const std::vector<at::Tensor>& maps) {
  const size_t n = maps.size();
  std::vector<at::Tensor> results(n);
  at::Tensor last_inner = inner_[n - 1]->forward(maps[n - 1]);
  results[n - 1] = layer_[n - 1]->forward(last_inner);
  for (size_t i = n - 1; i-- > 0;) {
    const at::Tensor lateral = inner_[i]->forward(maps[i]);
    const at::Tensor top_down = at::upsample_nearest2d(last_inner, lateral.sizes().slice(2), std::nullopt, std::nullopt);
    last_inner = lateral + top_down;
    results[i] = layer_[i]->forward(last_inner);
  }
  for (at::Tensor& extra : extra_blocks_->forward(results.back())) results.push_back(std::move(extra));
  return results;
}

ResNetFpn::ResNetFpn(int64_t depth, int64_t in_channels, int64_t fpn_channels) {
  resnet::ResNetOptions o;
  o.depth = depth;
  o.in_channels = in_channels;
  o.fc = false;
  body_ = register_module("body", std::make_shared<resnet::ResNet>(o));
  // torchvision: in_channels_stage2 = backbone.inplanes // 8, then x2 per returned layer.
  const int64_t c2 = depth == 50 ? 256 : 64;
  fpn_ = register_module("fpn", std::make_shared<FeaturePyramidNetwork>(std::vector<int64_t>{c2 * 2, c2 * 4, c2 * 8},
                                                                          fpn_channels));
}

std::vector<at::Tensor> ResNetFpn::forward(const at::Tensor& x) {
  std::vector<at::Tensor> stages = body_->stages(x);
  return fpn_->forward({stages[1], stages[2], stages[3]});
}

}  // namespace tp::detection
