// org.torchhost.convnext: the module (architecture and initialisation), following
// torchvision/models/convnext.py line by line, so that names, shapes, parameter counts and even
// the initial draws agree (tests/plugins/zoo_convnext_vit checks them against torchvision).
#include "convnext_net.h"

#include <ATen/ops/adaptive_avg_pool2d.h>
#include <ATen/ops/full.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/container/functional.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <string>

namespace tp::convnext {
namespace {

constexpr double kLayerNormEps = 1e-6;

/// torchvision's Permute([0, 2, 3, 1]) and Permute([0, 3, 1, 2]) modules.
torch::nn::Functional permute(std::vector<int64_t> dims) {
  return torch::nn::Functional([dims](at::Tensor x) { return x.permute(dims); });
}

}  // namespace

bool is_variant(const std::string& variant) {
  return variant == "tiny" || variant == "small" || variant == "base";
}

std::vector<StageSetting> stage_settings(const std::string& variant) {
  if (variant == "tiny") return {{96, 192, 3}, {192, 384, 3}, {384, 768, 9}, {768, 0, 3}};
  if (variant == "small") return {{96, 192, 3}, {192, 384, 3}, {384, 768, 27}, {768, 0, 3}};
  return {{128, 256, 3}, {256, 512, 3}, {512, 1024, 27}, {1024, 0, 3}};  // base
}

double default_stochastic_depth_prob(const std::string& variant) {
  if (variant == "tiny") return 0.1;
  if (variant == "small") return 0.4;
  return 0.5;  // base
}

LayerNorm2dImpl::LayerNorm2dImpl(int64_t channels)
    : weight(register_parameter("weight", at::ones({channels}))),
      bias(register_parameter("bias", at::zeros({channels}))) {}

at::Tensor LayerNorm2dImpl::forward(const at::Tensor& x) {
  return at::layer_norm(x.permute({0, 2, 3, 1}), {weight.size(0)}, weight, bias, kLayerNormEps).permute({0, 3, 1, 2});
}

CNBlock::CNBlock(int64_t channels, double layer_scale, double drop_probability)
    : drop_probability_(drop_probability) {
  using torch::nn::Conv2dOptions;
  block_ = register_module(
      "block", torch::nn::Sequential(
                   torch::nn::Conv2d(Conv2dOptions(channels, channels, 7).padding(3).groups(channels)),
                   permute({0, 2, 3, 1}),
                   torch::nn::LayerNorm(torch::nn::LayerNormOptions({channels}).eps(kLayerNormEps)),
                   torch::nn::Linear(channels, 4 * channels), torch::nn::GELU(),
                   torch::nn::Linear(4 * channels, channels), permute({0, 3, 1, 2})));
  layer_scale_ = register_parameter("layer_scale", at::full({channels, 1, 1}, layer_scale));
}

at::Tensor CNBlock::forward(const at::Tensor& x) {
  at::Tensor result = stochastic_depth(layer_scale_ * block_->forward(x), drop_probability_, is_training());
  return result + x;
}

ConvNeXt::ConvNeXt(const ConvNeXtOptions& options) {
  using torch::nn::Conv2d;
  using torch::nn::Conv2dOptions;
  const std::vector<StageSetting> settings = stage_settings(options.variant);
  auto features = register_module("features", torch::nn::ModuleList());

  // Modules are built in torchvision's order: their default initialisation consumes the
  // generator exactly as torchvision's does, so the trunc_normal_ draws below are torchvision's.
  stem_ = torch::nn::Sequential(Conv2d(Conv2dOptions(options.in_channels, settings[0].channels, 4).stride(4)),
                                LayerNorm2d(settings[0].channels));
  features->push_back(stem_);
  depths_.push_back({"features.0", 0});

  int64_t total_blocks = 0;
  for (const StageSetting& s : settings) total_blocks += s.blocks;
  int64_t block_id = 0;
  for (const StageSetting& s : settings) {
    const std::string stage_name = "features." + std::to_string(features->size());
    auto stage = torch::nn::ModuleList();
    stages_.emplace_back();
    for (int64_t b = 0; b < s.blocks; ++b, ++block_id) {
      // torchvision's linear schedule: 0 for the first block, stochastic_depth_prob for the last.
      const double p = options.stochastic_depth_prob * static_cast<double>(block_id) /
                       (static_cast<double>(total_blocks) - 1.0);
      auto block = std::make_shared<CNBlock>(s.channels, options.layer_scale, p);
      stage->push_back(block);
      stages_.back().push_back(block);
      depths_.push_back({stage_name + "." + std::to_string(b), static_cast<uint32_t>(depths_.size())});
    }
    features->push_back(stage);
    if (s.out_channels != 0) {
      depths_.push_back({"features." + std::to_string(features->size()), static_cast<uint32_t>(depths_.size())});
      downsample_.push_back(torch::nn::Sequential(
          LayerNorm2d(s.channels), Conv2d(Conv2dOptions(s.channels, s.out_channels, 2).stride(2))));
      features->push_back(downsample_.back());
    }
  }
  const int64_t last_channels = settings.back().channels;
  classifier_ = register_module(
      "classifier", torch::nn::Sequential(LayerNorm2d(last_channels), torch::nn::Flatten(),
                                          torch::nn::Linear(last_channels, options.num_classes)));

  torch::NoGradGuard no_grad;
  for (const auto& module : modules(/*include_self=*/false)) {
    if (auto* c = module->as<torch::nn::Conv2dImpl>()) {
      tp::cpp::trunc_normal_(c->weight, 0.02);
      c->bias.zero_();
    } else if (auto* l = module->as<torch::nn::LinearImpl>()) {
      tp::cpp::trunc_normal_(l->weight, 0.02);
      l->bias.zero_();
    }
  }
}

at::Tensor ConvNeXt::forward(const at::Tensor& x) {
  at::Tensor h = stem_->forward(x);
  for (size_t s = 0; s < stages_.size(); ++s) {
    // Checkpoint units capture by value: the lambdas live until backward.
    for (const auto& block : stages_[s])
      h = checkpoint_block(*block, [block](const at::Tensor& in) { return block->forward(in); }, h);
    if (s < downsample_.size()) h = downsample_[s]->forward(h);
  }
  return classifier_->forward(at::adaptive_avg_pool2d(h, {1, 1}));
}

std::vector<tp::cpp::LayerDepth> ConvNeXt::layer_depths() const { return depths_; }

std::vector<double> ConvNeXt::drop_probabilities() const {
  std::vector<double> out;
  for (const auto& stage : stages_)
    for (const auto& block : stage) out.push_back(block->drop_probability());
  return out;
}

}  // namespace tp::convnext
