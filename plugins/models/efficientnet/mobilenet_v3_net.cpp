// org.torchhost.mobilenet_v3: the module, following torchvision/models/mobilenetv3.py
// (InvertedResidualConfig, InvertedResidual, MobileNetV3, _mobilenet_v3_conf) so that names,
// shapes, parameter counts and numbers agree (tests/plugins/zoo_efficientnet checks them against
// torchvision itself).
#include "mobilenet_v3_net.h"

#include <ATen/ops/adaptive_avg_pool2d.h>
#include <ATen/ops/hardswish.h>

#include <iterator>

namespace tp::efficientnet {
namespace {

// Every MobileNetV3 BatchNorm: partial(nn.BatchNorm2d, eps=0.001, momentum=0.01).
constexpr NormOptions kNorm{1e-3, 0.01};

/// A row of Tables 1 and 2 of the MobileNetV3 paper (bneck_conf in _mobilenet_v3_conf).
struct BlockRow {
  int64_t in, kernel, expanded, out;
  bool se;
  bool hardswish;  ///< "HS"; otherwise "RE" (ReLU)
  int64_t stride;
};
constexpr BlockRow kLarge[] = {
    {16, 3, 16, 16, false, false, 1},   {16, 3, 64, 24, false, false, 2},   {24, 3, 72, 24, false, false, 1},
    {24, 5, 72, 40, true, false, 2},    {40, 5, 120, 40, true, false, 1},   {40, 5, 120, 40, true, false, 1},
    {40, 3, 240, 80, false, true, 2},   {80, 3, 200, 80, false, true, 1},   {80, 3, 184, 80, false, true, 1},
    {80, 3, 184, 80, false, true, 1},   {80, 3, 480, 112, true, true, 1},   {112, 3, 672, 112, true, true, 1},
    {112, 5, 672, 160, true, true, 2},  {160, 5, 960, 160, true, true, 1},  {160, 5, 960, 160, true, true, 1},
};
constexpr BlockRow kSmall[] = {
    {16, 3, 16, 16, true, false, 2},  {16, 3, 72, 24, false, false, 2}, {24, 3, 88, 24, false, false, 1},
    {24, 5, 96, 40, true, true, 2},   {40, 5, 240, 40, true, true, 1},  {40, 5, 240, 40, true, true, 1},
    {40, 5, 120, 48, true, true, 1},  {48, 5, 144, 48, true, true, 1},  {48, 5, 288, 96, true, true, 2},
    {96, 5, 576, 96, true, true, 1},  {96, 5, 576, 96, true, true, 1},
};

/// The row's block: InvertedResidualConfig with width_mult 1 (adjust_channels rounds to 8).
InvertedResidualSpec spec_of(const BlockRow& row, int64_t dilation) {
  InvertedResidualSpec s;
  s.in = make_divisible(static_cast<double>(row.in));
  s.expanded = make_divisible(static_cast<double>(row.expanded));
  s.out = make_divisible(static_cast<double>(row.out));
  s.kernel = row.kernel;
  s.stride = row.stride;
  s.dilation = dilation;
  s.squeeze = row.se ? make_divisible(static_cast<double>(s.expanded / 4)) : 0;
  s.activation = row.hardswish ? Activation::kHardswish : Activation::kReLU;
  // SElayer = partial(SqueezeExcitation, scale_activation=nn.Hardsigmoid); activation ReLU.
  s.se_activation = Activation::kReLU;
  s.se_scale = Activation::kHardsigmoid;
  return s;
}

}  // namespace

MobileNetV3Features::MobileNetV3Features(const MobileNetV3Options& options) {
  const bool large = options.variant == "large";
  const BlockRow* rows = large ? std::begin(kLarge) : std::begin(kSmall);
  const size_t count = large ? std::size(kLarge) : std::size(kSmall);
  // _mobilenet_v3_conf's `dilation` applies to the rows from the last strided one (C4) on.
  size_t last_strided = 0;
  for (size_t i = 0; i < count; ++i)
    if (rows[i].stride > 1) last_strided = i;

  NormOptions norm = kNorm;
  norm.fused = options.fused_norm;
  stem_ = std::make_shared<ConvNormActivation>(options.in_channels, make_divisible(static_cast<double>(rows[0].in)), 3,
                                               2, 1, norm, Activation::kHardswish);
  register_module("0", stem_);
  stage_indices_.push_back(0);
  channels_.push_back(make_divisible(static_cast<double>(rows[0].in)));
  for (size_t i = 0; i < count; ++i) {
    const InvertedResidualSpec spec = spec_of(rows[i], options.dilated && i >= last_strided ? 2 : 1);
    blocks_.push_back(register_module(std::to_string(i + 1), std::make_shared<InvertedResidual>(spec, norm)));
    if (rows[i].stride > 1) stage_indices_.push_back(i + 1);
    channels_.push_back(spec.out);
  }
  const int64_t last_in = channels_.back();
  head_conv_ = std::make_shared<ConvNormActivation>(last_in, 6 * last_in, 1, 1, 1, norm, Activation::kHardswish);
  register_module(std::to_string(count + 1), head_conv_);
  stage_indices_.push_back(count + 1);
  channels_.push_back(6 * last_in);
}

std::vector<tp::cpp::LayerDepth> MobileNetV3Features::layer_depths(const std::string& prefix) const {
  std::vector<tp::cpp::LayerDepth> depths;
  for (size_t i = 0; i <= blocks_.size() + 1; ++i) depths.push_back({prefix + std::to_string(i), static_cast<uint32_t>(i)});
  return depths;
}

MobileNetV3::MobileNetV3(const MobileNetV3Options& options) {
  const int64_t last_channel = make_divisible(options.variant == "large" ? 1280.0 : 1024.0);
  features_ = register_module("features", std::make_shared<MobileNetV3Features>(options));
  const int64_t features_out = features_->channels(features_->stage_indices().back());

  // classifier = Sequential(Linear, Hardswish, Dropout, Linear): Linears "0" and "3".
  auto classifier = register_module("classifier", std::make_shared<torch::nn::Module>());
  fc1_ = classifier->register_module("0", torch::nn::Linear(features_out, last_channel));
  dropout_ = classifier->register_module("2", torch::nn::Dropout(options.dropout));
  fc2_ = classifier->register_module("3", torch::nn::Linear(last_channel, options.num_classes));

  // torchvision's initialisation, replacing LibTorch's default draws.
  init_convs_and_norms(*this);
  torch::NoGradGuard no_grad;
  for (auto* fc : {&fc1_, &fc2_}) {
    (*fc)->weight.normal_(0.0, 0.01);
    (*fc)->bias.zero_();
  }
}

void MobileNetV3::set_activation_checkpointing(bool enabled) {
  Checkpointable::set_activation_checkpointing(enabled);
  features_->set_activation_checkpointing(enabled);
}

at::Tensor MobileNetV3::forward(const at::Tensor& x) {
  const at::Tensor h = at::hardswish(fc1_->forward(at::adaptive_avg_pool2d(features_->forward(x), {1, 1}).flatten(1)));
  return fc2_->forward(dropout_->forward(h));
}

}  // namespace tp::efficientnet
