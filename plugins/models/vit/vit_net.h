// org.torchhost.vit: torchvision's Vision Transformer (ViT-B/16, B/32, L/16) as a
// torch::nn::Module.
//
// The module tree mirrors torchvision.models.vision_transformer, so the state names are
// torchvision's state_dict keys and a torchvision checkpoint loads through train.init_weights
// unchanged:
//   class_token                 [1, 1, D]
//   conv_proj                   Conv2d patch x patch / patch (the patchify stem)
//   encoder.pos_embedding       [1, (image_size / patch)^2 + 1, D]
//   encoder.layers.encoder_layer_<i>.{ln_1, self_attention, ln_2, mlp.0, mlp.3}
//   encoder.ln, heads.head
// self_attention stores nn.MultiheadAttention's parameters (in_proj_weight [3D, D], in_proj_bias,
// out_proj.weight, out_proj.bias) but computes through at::scaled_dot_product_attention, so CUDA
// runs the flash or memory-efficient kernels. The model has no buffers.
//
// Beyond torchvision: `drop_path`, timm's stochastic depth on both residual branches of every
// encoder layer (rate linear in depth, 0 for the first layer); at 0 the model is torchvision's.
//
// Activation checkpointing: every encoder layer is a checkpoint unit (dropout and drop-path
// draws are replayed in the recompute).
//
// Layer depths (optim.layer_decay), as timm/BEiT: conv_proj, class_token and
// encoder.pos_embedding at 0, encoder layer i at i + 1; encoder.ln and heads are the head.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tp/cpp/activation_checkpoint.h"
#include "tp/cpp/model_adapter.h"
#include "tp/cpp/model_layers.h"

namespace tp::vit {

/// The shape of one torchvision variant.
struct VariantSetting {
  int64_t patch_size;
  int64_t num_layers;
  int64_t num_heads;
  int64_t hidden_dim;
  int64_t mlp_dim;
};

/// What the config chooses.
struct ViTOptions {
  std::string variant = "b_16";  ///< "b_16" | "b_32" | "l_16"
  int64_t image_size = 224;      ///< a multiple of the patch size
  int64_t num_classes = 1000;
  int64_t in_channels = 3;       ///< torchvision fixes 3
  double dropout = 0.0;          ///< after the embedding, the attention and both MLP layers
  double attention_dropout = 0.0;
  double drop_path = 0.0;        ///< timm's stochastic depth rate of the last layer
};

/// Whether `variant` is one this module builds.
bool is_variant(const std::string& variant);
/// torchvision's vit_<variant> shape; `variant` must be valid (is_variant).
VariantSetting variant_setting(const std::string& variant);

/// nn.MultiheadAttention(D, heads, dropout, batch_first=True) self-attention with its parameter
/// names, computed through at::scaled_dot_product_attention (need_weights=False).
class SelfAttentionImpl : public torch::nn::Module {
 public:
  SelfAttentionImpl(int64_t hidden_dim, int64_t num_heads, double dropout);
  /// [B, L, D] -> [B, L, D].
  at::Tensor forward(const at::Tensor& x);

 private:
  int64_t num_heads_;
  double dropout_;
  at::Tensor in_proj_weight_;  // [3D, D]: query, key, value rows
  at::Tensor in_proj_bias_;    // [3D]
  torch::nn::Linear out_proj_{nullptr};
};
TORCH_MODULE(SelfAttention);

/// torchvision's EncoderBlock: x + attention(ln_1(x)), then + mlp(ln_2(.)), with dropout and
/// (timm) drop path on both branches. forward never modifies its input in place.
class EncoderBlock : public torch::nn::Module {
 public:
  EncoderBlock(const VariantSetting& v, double dropout, double attention_dropout, double drop_path);
  /// [B, L, D] -> [B, L, D].
  at::Tensor forward(const at::Tensor& input);

 private:
  double dropout_;
  double drop_path_;
  torch::nn::LayerNorm ln_1_{nullptr};
  SelfAttention self_attention_{nullptr};
  torch::nn::LayerNorm ln_2_{nullptr};
  torch::nn::Sequential mlp_{nullptr};  // 0 Linear, 1 GELU, 2 Dropout, 3 Linear, 4 Dropout
};

/// torchvision.models.vit_<variant>(image_size=..., num_classes=..., dropout=...,
/// attention_dropout=...), with a configurable number of input channels and timm's drop path.
/// Initialised as torchvision: conv_proj trunc_normal_(std = sqrt(1 / fan_in)) and bias 0,
/// class_token 0, pos_embedding normal(std 0.02), attention in_proj xavier_uniform_ and biases 0,
/// out_proj weight nn.Linear's default, MLP xavier_uniform_ with normal(std 1e-6) biases,
/// LayerNorms 1 and 0, heads.head 0. The draws come from the global generator in torchvision's
/// order, so a seed gives torchvision's initial weights.
class VisionTransformer : public torch::nn::Module, public tp::cpp::Checkpointable {
 public:
  /// `options` must be valid (the plugin validates them).
  explicit VisionTransformer(const ViTOptions& options);
  /// [B, in_channels, image_size, image_size] -> logits [B, num_classes].
  at::Tensor forward(const at::Tensor& x);
  /// optim.layer_decay's ordering (timm/BEiT): the embeddings at 0, encoder layer i at i + 1.
  std::vector<tp::cpp::LayerDepth> layer_depths() const;

 private:
  int64_t hidden_dim_;
  double dropout_;
  at::Tensor class_token_;
  torch::nn::Conv2d conv_proj_{nullptr};
  at::Tensor pos_embedding_;                          // encoder.pos_embedding
  std::vector<std::shared_ptr<EncoderBlock>> layers_;  // encoder.layers.encoder_layer_<i>
  torch::nn::LayerNorm ln_{nullptr};                  // encoder.ln
  torch::nn::Linear head_{nullptr};                   // heads.head
};

}  // namespace tp::vit
