// org.torchhost.vit: the module (architecture and initialisation), following
// torchvision/models/vision_transformer.py and torch.nn.MultiheadAttention line by line, so that
// names, shapes, parameter counts and even the initial draws agree (tests/plugins/zoo_convnext_vit
// checks them against torchvision).
#include "vit_net.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/zeros.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/dropout.h>

#include <cmath>
#include <string>

namespace tp::vit {
namespace {

constexpr double kLayerNormEps = 1e-6;

torch::nn::LayerNorm layer_norm(int64_t dim) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(kLayerNormEps));
}

}  // namespace

bool is_variant(const std::string& variant) { return variant == "b_16" || variant == "b_32" || variant == "l_16"; }

VariantSetting variant_setting(const std::string& variant) {
  if (variant == "b_16") return {16, 12, 12, 768, 3072};
  if (variant == "b_32") return {32, 12, 12, 768, 3072};
  return {16, 24, 16, 1024, 4096};  // l_16
}

SelfAttentionImpl::SelfAttentionImpl(int64_t hidden_dim, int64_t num_heads, double dropout)
    : num_heads_(num_heads), dropout_(dropout) {
  in_proj_weight_ = register_parameter("in_proj_weight", at::empty({3 * hidden_dim, hidden_dim}));
  in_proj_bias_ = register_parameter("in_proj_bias", at::empty({3 * hidden_dim}));
  // nn.MultiheadAttention's order of draws: out_proj's default initialisation, then
  // _reset_parameters (xavier in_proj_weight; both biases 0; out_proj.weight keeps its default).
  out_proj_ = register_module("out_proj", torch::nn::Linear(hidden_dim, hidden_dim));
  torch::NoGradGuard no_grad;
  torch::nn::init::xavier_uniform_(in_proj_weight_);
  in_proj_bias_.zero_();
  out_proj_->bias.zero_();
}

at::Tensor SelfAttentionImpl::forward(const at::Tensor& x) {
  const int64_t batch = x.size(0), length = x.size(1), dim = x.size(2);
  // [B, L, 3D] -> [3, B, heads, L, D / heads]: query, key and value, head-major as
  // nn.MultiheadAttention splits them.
  const at::Tensor qkv = at::linear(x, in_proj_weight_, in_proj_bias_)
                             .view({batch, length, 3, num_heads_, dim / num_heads_})
                             .permute({2, 0, 3, 1, 4});
  const at::Tensor out =
      at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], /*attn_mask=*/{}, is_training() ? dropout_ : 0.0);
  // [B, heads, L, D / heads] -> [L * B, D] -> out_proj -> [B, L, D] over [L, B, D] memory, as
  // nn.MultiheadAttention lays its output out (one copy either way): a dropout after the
  // attention then draws its mask over the elements in torchvision's order.
  const at::Tensor merged = out.permute({2, 0, 1, 3}).reshape({length * batch, dim});
  return out_proj_->forward(merged).view({length, batch, dim}).transpose(0, 1);
}

EncoderBlock::EncoderBlock(const VariantSetting& v, double dropout, double attention_dropout, double drop_path)
    : dropout_(dropout), drop_path_(drop_path) {
  ln_1_ = register_module("ln_1", layer_norm(v.hidden_dim));
  self_attention_ = register_module("self_attention", SelfAttention(v.hidden_dim, v.num_heads, attention_dropout));
  ln_2_ = register_module("ln_2", layer_norm(v.hidden_dim));
  torch::nn::Linear fc1(v.hidden_dim, v.mlp_dim);
  torch::nn::Linear fc2(v.mlp_dim, v.hidden_dim);
  mlp_ = register_module("mlp", torch::nn::Sequential(fc1, torch::nn::GELU(), torch::nn::Dropout(dropout), fc2,
                                                     torch::nn::Dropout(dropout)));
  // MLPBlock's re-initialisation, after both Linears drew their defaults.
  torch::NoGradGuard no_grad;
  for (const torch::nn::Linear& fc : {fc1, fc2}) {
    torch::nn::init::xavier_uniform_(fc->weight);
    torch::nn::init::normal_(fc->bias, 0.0, 1e-6);
  }
}

at::Tensor EncoderBlock::forward(const at::Tensor& input) {
  at::Tensor attended = at::dropout(self_attention_->forward(ln_1_->forward(input)), dropout_, is_training());
  // Operand order as torchvision's `x + input`, so the sum takes the same memory layout.
  const at::Tensor x = tp::cpp::stochastic_depth(attended, drop_path_, is_training()) + input;
  return x + tp::cpp::stochastic_depth(mlp_->forward(ln_2_->forward(x)), drop_path_, is_training());
}

VisionTransformer::VisionTransformer(const ViTOptions& options)
    : hidden_dim_(variant_setting(options.variant).hidden_dim), dropout_(options.dropout) {
  const VariantSetting v = variant_setting(options.variant);
  const int64_t patches = options.image_size / v.patch_size;
  // Built in torchvision's order, so that the generator is consumed as torchvision consumes it.
  class_token_ = register_parameter("class_token", at::zeros({1, 1, v.hidden_dim}));
  conv_proj_ = register_module(
      "conv_proj", torch::nn::Conv2d(torch::nn::Conv2dOptions(options.in_channels, v.hidden_dim, v.patch_size)
                                         .stride(v.patch_size)));
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
  {
    torch::NoGradGuard no_grad;
    pos_embedding_ = encoder->register_parameter("pos_embedding", at::empty({1, patches * patches + 1, v.hidden_dim}));
    torch::nn::init::normal_(pos_embedding_, 0.0, 0.02);  // from BERT
  }
  auto layers = encoder->register_module("layers", std::make_shared<torch::nn::Module>());
  // timm's schedule: torch.linspace(0, drop_path_rate, depth), in float32 as timm computes it.
  const at::Tensor rates = at::linspace(0.0, options.drop_path, v.num_layers, at::kFloat).to(at::kDouble);
  for (int64_t i = 0; i < v.num_layers; ++i) {
    layers_.push_back(layers->register_module(
        "encoder_layer_" + std::to_string(i),
        std::make_shared<EncoderBlock>(v, options.dropout, options.attention_dropout, rates[i].item<double>())));
  }
  ln_ = encoder->register_module("ln", layer_norm(v.hidden_dim));
  auto heads = register_module("heads", std::make_shared<torch::nn::Module>());
  head_ = heads->register_module("head", torch::nn::Linear(v.hidden_dim, options.num_classes));

  torch::NoGradGuard no_grad;
  tp::cpp::trunc_normal_(conv_proj_->weight, std::sqrt(1.0 / static_cast<double>(options.in_channels * v.patch_size * v.patch_size)));
  conv_proj_->bias.zero_();
  head_->weight.zero_();
  head_->bias.zero_();
}

at::Tensor VisionTransformer::forward(const at::Tensor& x) {
  const int64_t batch = x.size(0);
  // [B, C, H, W] -> [B, D, H/p, W/p] -> [B, (H/p)(W/p), D], after the class token.
  at::Tensor h = conv_proj_->forward(x);
  h = h.reshape({batch, hidden_dim_, h.size(2) * h.size(3)}).permute({0, 2, 1});
  h = at::cat({class_token_.expand({batch, -1, -1}), h}, 1);
  h = at::dropout(h + pos_embedding_, dropout_, is_training());
  for (const auto& layer : layers_)
    h = checkpoint_block(*layer, [layer](const at::Tensor& in) { return layer->forward(in); }, h);
  return head_->forward(ln_->forward(h).select(1, 0));
}

std::vector<tp::cpp::LayerDepth> VisionTransformer::layer_depths() const {
  std::vector<tp::cpp::LayerDepth> depths = {{"conv_proj", 0}, {"class_token", 0}, {"encoder.pos_embedding", 0}};
  for (size_t i = 0; i < layers_.size(); ++i)
    depths.push_back({"encoder.layers.encoder_layer_" + std::to_string(i), static_cast<uint32_t>(i + 1)});
  return depths;
}

}  // namespace tp::vit
