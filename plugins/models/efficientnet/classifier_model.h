// efficientnet: the component class both components share, an image classifier network `Net`
// (EfficientNet or MobileNetV3) reading its image from one batch field. The C shell (state lent
// to the host, to_device keeping num_batches_tracked int64, output ownership) is
// tp/cpp/model_adapter.h.
#pragma once

#include <c10/util/StringUtil.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tp/cpp/guard.h"
#include "tp/cpp/model_adapter.h"

namespace tp::efficientnet {

/// The component: `Net` applied to the batch field `input`, output "logits". The host trains the
/// network's own parameters and buffers (state_root), under torchvision's names.
template <typename Net>
class ClassifierModel {
 public:
  /// `id` (static storage) names the component in messages.
  ClassifierModel(const char* id, std::shared_ptr<Net> net, int64_t in_channels, std::string input)
      : id_(id), net_(std::move(net)), in_channels_(in_channels), input_(std::move(input)) {}

  tp::cpp::Outputs forward(const tp::cpp::Inputs& inputs) {
    const at::Tensor& x = inputs.get(input_);
    if (x.dim() != 4 || x.size(1) != in_channels_ || !x.is_floating_point())
      throw tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT,
                             std::string(id_) + ": input '" + input_ + "': expected a floating [B, " +
                                 std::to_string(in_channels_) + ", H, W] image (in_channels = " +
                                 std::to_string(in_channels_) + "), got " +
                                 std::string(c10::toString(x.scalar_type())) + " " + c10::str(x.sizes()));
    return {{"logits", net_->forward(x.scalar_type() == dtype_ ? x : x.to(dtype_))}};
  }

  Net& state_root() { return *net_; }
  void train(bool on) { net_->train(on); }
  void set_dtype(at::ScalarType dtype) { dtype_ = dtype; }
  void set_activation_checkpointing(bool enabled) { net_->set_activation_checkpointing(enabled); }
  std::vector<tp::cpp::LayerDepth> layer_depths() const { return net_->layer_depths(); }

 private:
  const char* id_;
  std::shared_ptr<Net> net_;
  int64_t in_channels_;
  std::string input_;
  at::ScalarType dtype_ = at::kFloat;
};

}  // namespace tp::efficientnet
