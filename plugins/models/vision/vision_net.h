// vision_models: the pieces shared by the five model components of this library.
//
// Every model is a VisionNet (a torch::nn::Module that reads its inputs by name and returns named
// outputs). tp/cpp/model_adapter.h turns any VisionNet factory into a complete tp_model_v1_t table
// (vision_plugin.cpp lists them), so a model file only builds modules and declares its descriptor.
//
// Activation checkpointing (tp.model/1 @since 1.1): VisionNet is a tp::cpp::Checkpointable. A
// model declares its checkpointable blocks by running them through checkpoint_block(), and
// overrides set_activation_checkpointing() once to pass the switch to sub-modules that do the
// same (the ConvTrunk).
//
// Layer depths (tp.model/1 @since 1.4, optim.layer_decay): each model lists its layers from the
// input on (the trunk's blocks, the MLP's hidden layers); the heads are unclaimed, so they keep
// the full lr.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tp/cpp/activation_checkpoint.h"
#include "tp/cpp/config.h"
#include "tp/cpp/model_adapter.h"
#include "tp/entry.h"
#include "tp/iface/model.h"

namespace tp::vision {

/// Base of every model in this library. Activation checkpointing is off until the host's
/// set_activation_checkpointing; a model whose blocks run through checkpoint_block() honours it.
class VisionNet : public torch::nn::Module, public tp::cpp::Checkpointable {
 public:
  /// Runs the model on the batch fields `inputs` (borrowed for the call); output names are
  /// static. Throws tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT) naming a missing or misshapen input.
  virtual tp::cpp::Outputs forward(const tp::cpp::Inputs& inputs) = 0;
  /// optim.layer_decay's ordering (tp.model/1 @since 1.4): every layer nearer the input at a
  /// smaller depth; the heads are left unclaimed (one past the deepest, full lr).
  virtual std::vector<tp::cpp::LayerDepth> layer_depths() const = 0;

  /// The floating dtype of the parameters (fp32 after create; changed by to_device). Floating
  /// inputs of another dtype are cast to it, so a float32 batch drives a float64 model.
  at::ScalarType dtype() const { return dtype_; }
  /// Recorded by the model adapter's to_device after it converted the parameters.
  void set_dtype(at::ScalarType dtype) { dtype_ = dtype; }

 protected:
  /// `inputs[name]` checked to be a floating [B, channels, size, size] image and cast to dtype().
  /// Throws tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT) with the expected and actual shape.
  at::Tensor image_input(const tp::cpp::Inputs& inputs, const std::string& name, int64_t channels,
                         int64_t size) const;
  /// `inputs[name]` checked to be floating with `features` elements per sample, cast to dtype()
  /// and flattened to [B, features].
  at::Tensor flat_input(const tp::cpp::Inputs& inputs, const std::string& name, int64_t features) const;

 private:
  at::ScalarType dtype_ = at::kFloat;
};

/// The CNN trunk the three convolutional models share: three blocks of
/// conv3x3 (no bias) - BatchNorm - ReLU - maxpool 2x2, with width, 2*width, 2*width channels.
/// Maps [B, in_channels, S, S] to [B, 2*width, S/8, S/8].
/// Parameters: 9*width*(in_channels + 6*width) conv weights + 10*width BN affine values,
/// plus 2 running-stat vectors and one num_batches_tracked buffer per block.
/// Each block is a checkpoint unit (set_activation_checkpointing(true)): only the blocks' inputs
/// are kept in training, and the block runs again in backward.
class ConvTrunk : public torch::nn::Module, public tp::cpp::Checkpointable {
 public:
  /// `in_channels` and `width` must be positive (checked by the caller's config validation).
  ConvTrunk(int64_t in_channels, int64_t width);
  /// [B, in_channels, S, S] -> [B, out_channels(), S/8, S/8]; S must be a multiple of 8.
  at::Tensor forward(const at::Tensor& x);
  /// Channels of the feature map (2 * width).
  int64_t out_channels() const { return out_channels_; }
  /// Appends block i's conv and BatchNorm (under "<prefix>.conv<i>", "<prefix>.bn<i>") at depth
  /// `first` + i - 1; returns the depth after the last block.
  uint32_t append_layer_depths(const std::string& prefix, uint32_t first, std::vector<tp::cpp::LayerDepth>& out) const;

 private:
  /// Block `i`: conv - BN - ReLU - maxpool. Reads `x` only (no in-place on it).
  at::Tensor block(size_t i, const at::Tensor& x);
  std::vector<torch::nn::Conv2d> convs_;
  std::vector<torch::nn::BatchNorm2d> norms_;
  int64_t out_channels_;
};

/// Config values the three trunk CNNs validate the same way: in_channels, num_classes, width > 0
/// and image_size a positive multiple of 8. `component` prefixes the error message.
struct CnnConfig {
  int64_t in_channels;
  int64_t num_classes;
  int64_t width;
  int64_t image_size;
};
/// Reads and checks the shared CNN keys; throws tp::cpp::Failure(TP_ERR_CONFIG).
CnnConfig read_cnn_config(const tp::cpp::ConfigReader& cfg, const char* component);

/// tp/cpp/config.h's check: Failure(TP_ERR_CONFIG, "<component>: <key> <what>, got <value>").
using tp::cpp::require_config;

/// A model on one ConvTrunk, registered as "trunk", reading the [C, S, S] image `input`
/// (small_cnn, multi_head_cnn). The trunk's blocks are its checkpoint units and its layer depths;
/// the heads a subclass registers after the trunk are unclaimed (full lr).
class TrunkNet : public VisionNet {
 public:
  TrunkNet(std::string input, const CnnConfig& c) : input_(std::move(input)), c_(c) {
    trunk_ = register_module("trunk", std::make_shared<ConvTrunk>(c.in_channels, c.width));
  }

  void set_activation_checkpointing(bool enabled) override {
    VisionNet::set_activation_checkpointing(enabled);
    trunk_->set_activation_checkpointing(enabled);
  }

  std::vector<tp::cpp::LayerDepth> layer_depths() const override {
    std::vector<tp::cpp::LayerDepth> depths;
    trunk_->append_layer_depths("trunk", 0, depths);
    return depths;
  }

 protected:
  /// The trunk's map of the checked image: [B, trunk_channels(), S/8, S/8].
  at::Tensor feature_map(const tp::cpp::Inputs& inputs) {
    return trunk_->forward(image_input(inputs, input_, c_.in_channels, c_.image_size));
  }
  int64_t trunk_channels() const { return trunk_->out_channels(); }

 private:
  std::string input_;
  CnnConfig c_;
  std::shared_ptr<ConvTrunk> trunk_;
};

/// The schema of a TrunkNet model (small_cnn, multi_head_cnn).
inline constexpr tp_config_key_t kTrunkNetKeys[] = {
    {sizeof(tp_config_key_t), "input", TP_CFG_STRING, "\"image\"", "batch field holding the [C, S, S] image"},
    {sizeof(tp_config_key_t), "in_channels", TP_CFG_INT, "3", "image channels"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "3", "number of logits"},
    {sizeof(tp_config_key_t), "width", TP_CFG_INT, "32", "channels of the first block (then 2x, 2x)"},
    {sizeof(tp_config_key_t), "image_size", TP_CFG_INT, "32", "image height and width; a multiple of 8"},
};

/// Example fields at the defaults (the shapes dataset's): for the descriptors' `examples`.
inline constexpr tp_example_input_t kImageExample = {sizeof(tp_example_input_t), "image", TP_DTYPE_FLOAT32, 3, {3, 32, 32}, 0};
inline constexpr tp_example_input_t kLabelExample = {sizeof(tp_example_input_t), "label", TP_DTYPE_INT64, 0, {}, 3};
inline constexpr tp_example_input_t kBoxExample = {sizeof(tp_example_input_t), "bbox", TP_DTYPE_FLOAT32, 1, {4}, 0};

/* Components of this library: factory (in <model>.cpp) and descriptor (static storage). A factory
   builds the model from its validated config; it throws tp::cpp::Failure(TP_ERR_CONFIG) for
   values outside their range. */
std::shared_ptr<VisionNet> make_mlp(const tp::cpp::ConfigReader& cfg);
std::shared_ptr<VisionNet> make_small_cnn(const tp::cpp::ConfigReader& cfg);
std::shared_ptr<VisionNet> make_multi_head_cnn(const tp::cpp::ConfigReader& cfg);
std::shared_ptr<VisionNet> make_two_stream(const tp::cpp::ConfigReader& cfg);
std::shared_ptr<VisionNet> make_deep_cnn(const tp::cpp::ConfigReader& cfg);
extern const tp_descriptor_t kMlpDescriptor;
extern const tp_descriptor_t kSmallCnnDescriptor;
extern const tp_descriptor_t kMultiHeadCnnDescriptor;
extern const tp_descriptor_t kTwoStreamDescriptor;
extern const tp_descriptor_t kDeepCnnDescriptor;

}  // namespace tp::vision
