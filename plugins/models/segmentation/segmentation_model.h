// org.torchhost.segmentation: the component class for tp/cpp/model_adapter.h. It reads one image
// field of the batch, checks it, casts it to the model's floating dtype and returns "out" (and
// "aux" with aux_loss); the SegmentationNet is the state the host trains, under torchvision's names.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/StringUtil.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "segmentation_net.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/image_classifier.h"
#include "tp/cpp/model_adapter.h"

namespace tp::segmentation {

/// The component: the net applied to the batch field `input`.
class SegmentationModel {
 public:
  /// `id` (static storage) names the component in messages; `in_channels` and `input` come from
  /// tp::cpp::read_image_classifier_config.
  SegmentationModel(const char* id, std::shared_ptr<SegmentationNet> net, const tp::cpp::ImageClassifierConfig& config)
      : id_(id), net_(std::move(net)), in_channels_(config.in_channels), input_(config.input) {}

  /// [main] "out" [B, num_classes, H, W] and, with aux_loss, "aux" alike, from a floating
  /// [B, in_channels, H, W] image; throws Failure(TP_ERR_INVALID_ARGUMENT) naming the field, the
  /// expected and the actual shape otherwise. A float32 batch drives a model moved to another dtype.
  tp::cpp::Outputs forward(const tp::cpp::Inputs& inputs) {
    const at::Tensor& x = inputs.get(input_);
    if (x.dim() != 4 || x.size(1) != in_channels_ || x.size(2) < 1 || x.size(3) < 1 || !x.is_floating_point())
      throw tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT,
                             std::string(id_) + ": input '" + input_ + "': expected a floating [B, " +
                                 std::to_string(in_channels_) + ", H, W] image (in_channels = " +
                                 std::to_string(in_channels_) + "), got " +
                                 std::string(c10::toString(x.scalar_type())) + " " + c10::str(x.sizes()));
    SegmentationOutputs y = net_->forward(x.scalar_type() == dtype_ ? x : x.to(dtype_));
    tp::cpp::Outputs outputs = {{"out", std::move(y.out)}};
    if (y.aux.defined()) outputs.push_back({"aux", std::move(y.aux)});
    return outputs;
  }

  SegmentationNet& state_root() { return *net_; }
  void train(bool on) { net_->train(on); }
  void set_dtype(at::ScalarType dtype) { dtype_ = dtype; }
  void set_activation_checkpointing(bool enabled) { net_->set_activation_checkpointing(enabled); }
  std::vector<tp::cpp::LayerDepth> layer_depths() const { return net_->layer_depths(); }

 private:
  const char* id_;
  std::shared_ptr<SegmentationNet> net_;
  int64_t in_channels_;
  std::string input_;
  at::ScalarType dtype_ = at::kFloat;
};

}  // namespace tp::segmentation
