// org.torchhost.efficientnet: the module, following torchvision/models/efficientnet.py
// (MBConvConfig, MBConv, EfficientNet, _efficientnet_conf, efficientnet_b0..b7) so that names,
// shapes, parameter counts and numbers agree (tests/plugins/zoo_efficientnet checks them against
// torchvision itself).
#include "efficientnet_net.h"

#include <ATen/ops/adaptive_avg_pool2d.h>

#include <algorithm>
#include <cmath>

namespace tp::efficientnet {
namespace {

// efficientnet_b0..b7: (width_mult, depth_mult), the default dropout, and the norm layer: B5-B7
// pass partial(nn.BatchNorm2d, eps=0.001, momentum=0.01), B0-B4 keep nn.BatchNorm2d's defaults.
constexpr NormOptions kDefaultNorm{1e-5, 0.1};
constexpr NormOptions kLargeNorm{1e-3, 0.01};
const EfficientNetVariant kVariants[] = {
    {"b0", 1.0, 1.0, 0.2, kDefaultNorm}, {"b1", 1.0, 1.1, 0.2, kDefaultNorm}, {"b2", 1.1, 1.2, 0.3, kDefaultNorm},
    {"b3", 1.2, 1.4, 0.3, kDefaultNorm}, {"b4", 1.4, 1.8, 0.4, kDefaultNorm}, {"b5", 1.6, 2.2, 0.4, kLargeNorm},
    {"b6", 1.8, 2.6, 0.5, kLargeNorm},   {"b7", 2.0, 3.1, 0.5, kLargeNorm},
};

/// A row of Table 1 of the EfficientNet paper (bneck_conf in _efficientnet_conf), before scaling.
struct StageRow {
  double expand_ratio;
  int64_t kernel, stride, in, out, layers;
};
constexpr StageRow kStages[] = {
    {1, 3, 1, 32, 16, 1},  {6, 3, 2, 16, 24, 2},  {6, 5, 2, 24, 40, 2},   {6, 3, 2, 40, 80, 3},
    {6, 5, 1, 80, 112, 3}, {6, 5, 2, 112, 192, 4}, {6, 3, 1, 192, 320, 1},
};

}  // namespace

const EfficientNetVariant* find_efficientnet_variant(const std::string& name) {
  for (const auto& v : kVariants)
    if (name == v.name) return &v;
  return nullptr;
}

std::vector<std::vector<InvertedResidualSpec>> efficientnet_stages(const EfficientNetVariant& variant,
                                                                   double stochastic_depth_prob) {
  // MBConvConfig.adjust_depth: int(math.ceil(num_layers * depth_mult)).
  const auto depth_of = [&variant](const StageRow& row) {
    return static_cast<int64_t>(std::ceil(static_cast<double>(row.layers) * variant.depth_mult));
  };
  int64_t total = 0;
  for (const auto& row : kStages) total += depth_of(row);

  std::vector<std::vector<InvertedResidualSpec>> stages;
  int64_t block_id = 0;
  for (const auto& row : kStages) {
    const int64_t in = make_divisible(static_cast<double>(row.in) * variant.width_mult);
    const int64_t out = make_divisible(static_cast<double>(row.out) * variant.width_mult);
    const int64_t layers = depth_of(row);
    std::vector<InvertedResidualSpec> stage;
    for (int64_t b = 0; b < layers; ++b) {
      InvertedResidualSpec s;
      // Blocks after the first of a stage take its output and stride 1.
      s.in = b == 0 ? in : out;
      s.stride = b == 0 ? row.stride : 1;
      s.out = out;
      s.kernel = row.kernel;
      s.expanded = make_divisible(static_cast<double>(s.in) * row.expand_ratio);
      s.squeeze = std::max<int64_t>(1, s.in / 4);
      s.activation = s.se_activation = Activation::kSiLU;
      s.se_scale = Activation::kSigmoid;
      s.stochastic_depth_prob = stochastic_depth_prob * static_cast<double>(block_id) / static_cast<double>(total);
      stage.push_back(s);
      ++block_id;
    }
    stages.push_back(std::move(stage));
  }
  return stages;
}

EfficientNet::EfficientNet(const EfficientNetOptions& options) {
  const EfficientNetVariant& variant = *find_efficientnet_variant(options.variant);
  const auto stages = efficientnet_stages(variant, options.stochastic_depth_prob);
  NormOptions norm = variant.norm;
  norm.fused = options.fused_norm;

  auto features = register_module("features", std::make_shared<torch::nn::Module>());
  stem_ = std::make_shared<ConvNormActivation>(options.in_channels, stages.front().front().in, 3, 2, 1, norm,
                                               Activation::kSiLU);
  features->register_module("0", stem_);
  for (size_t i = 0; i < stages.size(); ++i) {
    const std::string stage_name = std::to_string(i + 1);
    auto stage = features->register_module(stage_name, std::make_shared<torch::nn::Module>());
    for (size_t b = 0; b < stages[i].size(); ++b) {
      auto block = std::make_shared<InvertedResidual>(stages[i][b], norm);
      blocks_.push_back(stage->register_module(std::to_string(b), block));
      block_names_.push_back("features." + stage_name + "." + std::to_string(b));
    }
  }
  const int64_t last_in = stages.back().back().out;
  head_conv_ = std::make_shared<ConvNormActivation>(last_in, 4 * last_in, 1, 1, 1, norm, Activation::kSiLU);
  head_conv_name_ = std::to_string(stages.size() + 1);
  features->register_module(head_conv_name_, head_conv_);
  head_conv_name_ = "features." + head_conv_name_;

  // classifier = Sequential(Dropout, Linear): the Linear is "classifier.1".
  auto classifier = register_module("classifier", std::make_shared<torch::nn::Module>());
  dropout_ = classifier->register_module("0", torch::nn::Dropout(options.dropout));
  fc_ = classifier->register_module("1", torch::nn::Linear(4 * last_in, options.num_classes));

  // torchvision's initialisation. Construction already drew LibTorch's defaults; these draws
  // replace them (the generator is the host-seeded global one, so it stays reproducible).
  init_convs_and_norms(*this);
  torch::NoGradGuard no_grad;
  const double range = 1.0 / std::sqrt(static_cast<double>(options.num_classes));
  fc_->weight.uniform_(-range, range);
  fc_->bias.zero_();
}

std::vector<tp::cpp::LayerDepth> EfficientNet::layer_depths() const {
  std::vector<tp::cpp::LayerDepth> depths = {{"features.0", 0}};
  for (size_t i = 0; i < block_names_.size(); ++i) depths.push_back({block_names_[i], static_cast<uint32_t>(i + 1)});
  // timm groups conv_head with the last block (its group_matcher's MATCH_PREV_GROUP): a level of
  // its own put every other layer one decay step lower than timm's (a fine-tuning trial: the
  // stem at 0.8^18 where timm's is at 0.8^17).
  depths.push_back({head_conv_name_, static_cast<uint32_t>(block_names_.size())});
  return depths;
}

at::Tensor EfficientNet::forward(const at::Tensor& x) {
  return fc_->forward(dropout_->forward(at::adaptive_avg_pool2d(features(x), {1, 1}).flatten(1)));
}

}  // namespace tp::efficientnet
