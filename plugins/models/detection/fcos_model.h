// org.torchhost.fcos: the component class for tp/cpp/model_adapter.h. It reads the image field
// (and, when present, its true sizes and the images' sizes before the dataset resized them),
// checks them, pads the batch to a multiple of 32 as torchvision's
// GeneralizedRCNNTransform.batch_images, runs the FcosNet and returns the head's outputs with
// their anchors; in eval mode also the post-processed detections, ragged.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fcos_net.h"
#include "postprocess.h"
#include "tp/cpp/model_adapter.h"

namespace tp::detection {

/// The component's settings besides the net's.
struct FcosModelConfig {
  int64_t in_channels = 3;
  std::string input = "image";          ///< the image field; "<input>_lengths" its true sizes
  std::string orig_size = "orig_size";  ///< the field of the sizes before resizing
  PostprocessOptions postprocess;
};

/// The component: the FcosNet applied to the batch.
///
/// Inputs: `<input>` floating [B, in_channels, H, W]; optional `<input>_lengths` integer [B, 3],
/// each image's true (C, H, W) inside the padding (the loader's TP_BATCH_PAD field; absent: every
/// image is H x W); optional `<orig_size>` integer or floating [B, 2], each image's (height,
/// width) before the dataset resized it (absent: no rescaling).
///
/// Outputs: `cls_logits` [B, A, K], `bbox_regression` [B, A, 4], `bbox_ctrness` [B, A, 1],
/// `anchors` [B, A, 4] and `num_anchors_per_level` int64 [B, 5] (expanded views of one per
/// batch); in eval mode also `detection_boxes` [D, 4], `detection_scores` [D], `detection_labels`
/// int64 [D], each with `<name>_offsets` int64 [B + 1].
class FcosModel {
 public:
  /// `id` (static storage) names the component in messages.
  FcosModel(const char* id, std::shared_ptr<FcosNet> net, FcosModelConfig config);

  /// [main] Throws Failure(TP_ERR_INVALID_ARGUMENT) naming the field, the expected and the actual
  /// dtype and shape of an input that does not fit. Training mode never synchronises the device;
  /// eval mode does (postprocess.h). A float32 batch drives a model moved to another dtype.
  tp::cpp::Outputs forward(const tp::cpp::Inputs& inputs);

  /// The module the host trains, under torchvision's names.
  FcosNet& state_root() { return *net_; }
  /// Training mode returns the head's outputs; eval mode adds the detections.
  void train(bool on) { net_->train(on); }
  /// The floating dtype the state was moved to; the image is cast to it.
  void set_dtype(at::ScalarType dtype) { dtype_ = dtype; }
  /// The ResNet's stem and residual blocks as checkpoint units.
  void set_activation_checkpointing(bool enabled) { net_->set_activation_checkpointing(enabled); }
  /// The ResNet's depths under "backbone.body."; the FPN and the head are the head.
  std::vector<tp::cpp::LayerDepth> layer_depths() const { return net_->layer_depths(); }

 private:
  /// The image, checked.
  const at::Tensor& image(const tp::cpp::Inputs& inputs) const;
  /// `<input>_lengths`, its shape and dtype checked; nullptr when the batch has none.
  const at::Tensor* lengths_field(const tp::cpp::Inputs& inputs, int64_t batch) const;
  /// `<orig_size>`, its shape and dtype checked; nullptr when the batch has none.
  const at::Tensor* orig_size_field(const tp::cpp::Inputs& inputs, int64_t batch) const;
  /// Each image's (height, width) inside the padding, from `lengths` (read on the host; sizes
  /// outside the batch are refused) or, without it, the batch's H, W.
  std::vector<std::array<int64_t, 2>> image_sizes(const at::Tensor* lengths, const at::Tensor& x) const;
  /// Each image's size before resizing, read on the host from `orig`; empty without it.
  static std::vector<std::array<double, 2>> original_sizes(const at::Tensor* orig);
  /// The field `name` when the batch has it, else nullptr.
  static const at::Tensor* optional_field(const tp::cpp::Inputs& inputs, const std::string& name);
  /// Failure(TP_ERR_INVALID_ARGUMENT): "<id>: input '<name>': expected <what>, got <dtype> <shape>".
  [[noreturn]] void misfit(const std::string& name, const std::string& expected, const at::Tensor& got) const;

  const char* id_;
  std::shared_ptr<FcosNet> net_;
  FcosModelConfig config_;
  std::string lengths_;  ///< "<input>_lengths"
  at::ScalarType dtype_ = at::kFloat;
};

}  // namespace tp::detection
