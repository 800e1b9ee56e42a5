// efficientnet: the shared layers, following torchvision/ops/misc.py, torchvision/ops/
// stochastic_depth.py and the block classes of efficientnet.py and mobilenetv3.py.
#include "blocks.h"

#include <ATen/ops/adaptive_avg_pool2d.h>
#include <ATen/ops/hardsigmoid.h>
#include <ATen/ops/hardswish.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <torch/nn/init.h>

#include "tp/cpp/fused_norm.h"

#include <algorithm>
#include <string>

namespace tp::efficientnet {

int64_t make_divisible(double v, int64_t divisor) {
  // int(v + divisor / 2) // divisor * divisor, with Python's truncation of a positive float.
  int64_t rounded = std::max(divisor, static_cast<int64_t>(v + static_cast<double>(divisor) / 2) / divisor * divisor);
  if (static_cast<double>(rounded) < 0.9 * v) rounded += divisor;
  return rounded;
}

at::Tensor activate(Activation a, const at::Tensor& x) {
  switch (a) {
    case Activation::kNone: return x;
    case Activation::kReLU: return at::relu(x);
    case Activation::kSiLU: return at::silu(x);
    case Activation::kHardswish: return at::hardswish(x);
    case Activation::kSigmoid: return at::sigmoid(x);
    case Activation::kHardsigmoid: return at::hardsigmoid(x);
  }
  return x;
}

namespace {

/// The SDK's name for `a` where tp::cpp::batch_norm_act applies it; nothing for the gates (sigmoid,
/// hardsigmoid), which only squeeze-excitation uses.
std::optional<tp::cpp::NormActivation> norm_activation(Activation a) {
  switch (a) {
    case Activation::kNone: return tp::cpp::NormActivation::kNone;
    case Activation::kReLU: return tp::cpp::NormActivation::kRelu;
    case Activation::kSiLU: return tp::cpp::NormActivation::kSilu;
    case Activation::kHardswish: return tp::cpp::NormActivation::kHardswish;
    default: return std::nullopt;
  }
}

}  // namespace

ConvNormActivation::ConvNormActivation(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t groups,
                                       const NormOptions& norm, Activation activation, int64_t dilation)
    : activation_(activation), fused_(norm.fused) {
  conv_ = register_module("0", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel)
                                                      .stride(stride)
                                                      .padding((kernel - 1) / 2 * dilation)
                                                      .dilation(dilation)
                                                      .groups(groups)
                                                      .bias(false)));
  norm_ = register_module(
      "1", torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(out).eps(norm.eps).momentum(norm.momentum)));
}

at::Tensor ConvNormActivation::forward(const at::Tensor& x) {
  const at::Tensor h = conv_->forward(x);
  if (const auto fusable = norm_activation(activation_)) return tp::cpp::batch_norm_act(norm_, h, *fusable, fused_);
  return activate(activation_, norm_->forward(h));
}

SqueezeExcitation::SqueezeExcitation(int64_t channels, int64_t squeeze, Activation activation, Activation scale)
    : activation_(activation), scale_(scale) {
  fc1_ = register_module("fc1", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, squeeze, 1)));
  fc2_ = register_module("fc2", torch::nn::Conv2d(torch::nn::Conv2dOptions(squeeze, channels, 1)));
}

at::Tensor SqueezeExcitation::forward(const at::Tensor& x) {
  const at::Tensor pooled = at::adaptive_avg_pool2d(x, {1, 1});
  return activate(scale_, fc2_->forward(activate(activation_, fc1_->forward(pooled)))) * x;
}

InvertedResidual::InvertedResidual(const InvertedResidualSpec& spec, const NormOptions& norm)
    : residual_(spec.stride == 1 && spec.in == spec.out), stochastic_depth_prob_(spec.stochastic_depth_prob) {
  if (spec.expanded != spec.in)
    layers_.push_back(std::make_shared<ConvNormActivation>(spec.in, spec.expanded, 1, 1, 1, norm, spec.activation));
  // torchvision: `stride = 1 if cnf.dilation > 1 else cnf.stride`; the residual test above keeps
  // the configured stride.
  layers_.push_back(std::make_shared<ConvNormActivation>(spec.expanded, spec.expanded, spec.kernel,
                                                         spec.dilation > 1 ? 1 : spec.stride, spec.expanded, norm,
                                                         spec.activation, spec.dilation));
  if (spec.squeeze > 0)
    layers_.push_back(std::make_shared<SqueezeExcitation>(spec.expanded, spec.squeeze, spec.se_activation, spec.se_scale));
  layers_.push_back(std::make_shared<ConvNormActivation>(spec.expanded, spec.out, 1, 1, 1, norm, Activation::kNone));
  // "block.<i>", the indices of torchvision's nn.Sequential.
  auto block = register_module("block", std::make_shared<torch::nn::Module>());
  for (size_t i = 0; i < layers_.size(); ++i) block->register_module(std::to_string(i), layers_[i]);
}

at::Tensor InvertedResidual::forward(const at::Tensor& x) {
  at::Tensor h = x;
  for (const auto& layer : layers_) h = layer->forward(h);
  if (!residual_) return h;
  return stochastic_depth(h, stochastic_depth_prob_, is_training()) + x;
}

void init_convs_and_norms(torch::nn::Module& root) {
  torch::NoGradGuard no_grad;
  for (const auto& module : root.modules(/*include_self=*/false)) {
    if (auto* c = module->as<torch::nn::Conv2dImpl>()) {
      // PyTorch's default nonlinearity for kaiming_normal_ is leaky_relu with a = 0: gain sqrt(2),
      // the same as kReLU.
      torch::nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
      if (c->bias.defined()) c->bias.zero_();
    } else if (auto* bn = module->as<torch::nn::BatchNorm2dImpl>()) {
      bn->weight.fill_(1.0);
      bn->bias.zero_();
    }
  }
}

at::Tensor FeatureNet::features(const at::Tensor& x) const { return feature_maps(x, {blocks_.size() + 1})[0]; }

std::vector<at::Tensor> FeatureNet::feature_maps(const at::Tensor& x, const std::vector<size_t>& indices) const {
  TORCH_CHECK(!indices.empty() && std::is_sorted(indices.begin(), indices.end()) && indices.back() <= blocks_.size() + 1,
              "FeatureNet::feature_maps: indices must be ascending, in [0, ", blocks_.size() + 1, "]");
  std::vector<at::Tensor> maps;
  auto next = indices.begin();
  const auto keep = [&](size_t index, const at::Tensor& h) {
    for (; next != indices.end() && *next == index; ++next) maps.push_back(h);
  };
  const auto stem = stem_;
  at::Tensor h = checkpoint_block(*stem, [stem](const at::Tensor& in) { return stem->forward(in); }, x);
  keep(0, h);
  for (size_t i = 0; i < blocks_.size() && next != indices.end(); ++i) {
    const auto block = blocks_[i];
    h = checkpoint_block(*block, [block](const at::Tensor& in) { return block->forward(in); }, h);
    keep(i + 1, h);
  }
  if (next != indices.end()) {
    const auto head = head_conv_;
    keep(blocks_.size() + 1, checkpoint_block(*head, [head](const at::Tensor& in) { return head->forward(in); }, h));
  }
  return maps;
}

}  // namespace tp::efficientnet
