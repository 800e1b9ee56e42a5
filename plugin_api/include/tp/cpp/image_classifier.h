// torchhost C++ helpers for Tier T model authors: the model component of an image classifier,
// for tp/cpp/model_adapter.h. It reads one image field of the batch, checks its shape, casts it to
// the model's floating dtype and returns "logits"; the network `Net` (a torch::nn::Module) is the
// state the host trains, under its own parameter names.
//
//   std::shared_ptr<tp::cpp::ImageClassifier<ResNet>> make(const tp::cpp::ConfigReader& cfg) {
//     const ResNetOptions o = read_options(cfg);
//     return std::make_shared<tp::cpp::ImageClassifier<ResNet>>(
//         kId, std::make_shared<ResNet>(o), o.in_channels, cfg.get_string("input"));
//   }
//   const tp::cpp::Component kComponents[] = {
//       tp::cpp::model_component<tp::cpp::ImageClassifier<ResNet>, kDescriptor, &make>()};
//
// What `Net` provides: `at::Tensor forward(const at::Tensor&)` ([B, C, H, W] -> [B, classes]),
// `set_activation_checkpointing(bool)` (tp::cpp::Checkpointable) and
// `std::vector<tp::cpp::LayerDepth> layer_depths() const`, so the adapter fills both ABI entries.
#ifndef TP_CPP_IMAGE_CLASSIFIER_H
#define TP_CPP_IMAGE_CLASSIFIER_H

#include <ATen/core/Tensor.h>
#include <c10/util/StringUtil.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tp/cpp/guard.h"
#include "tp/cpp/model_adapter.h"

namespace tp::cpp {

/// The image sizes a classifier accepts, besides a floating [B, in_channels, H, W] tensor.
struct ImageSizeRule {
  int64_t min = 1;   ///< H, W >= min (e.g. ConvNeXt's 32: four stride-2 stages)
  int64_t exact = 0; ///< > 0: H = W = exact (e.g. ViT's image_size: its position embeddings)
};

/// The component: `Net` applied to the batch field `input`, output "logits".
template <typename Net>
class ImageClassifier {
 public:
  /// `id` (static storage) names the component in messages.
  ImageClassifier(const char* id, std::shared_ptr<Net> net, int64_t in_channels, std::string input,
                  ImageSizeRule size = {})
      : id_(id), net_(std::move(net)), in_channels_(in_channels), input_(std::move(input)), size_(size) {}

  /// [main] Throws Failure(TP_ERR_INVALID_ARGUMENT) naming the field, the expected and the actual
  /// shape when the image does not fit; a float32 batch drives a model moved to another dtype.
  Outputs forward(const Inputs& inputs) {
    const at::Tensor& x = inputs.get(input_);
    const bool sized = x.dim() == 4 && x.size(2) >= size_.min && x.size(3) >= size_.min &&
                       (size_.exact == 0 || (x.size(2) == size_.exact && x.size(3) == size_.exact));
    if (!sized || x.size(1) != in_channels_ || !x.is_floating_point()) throw Failure(TP_ERR_INVALID_ARGUMENT, misfit(x));
    return {{"logits", net_->forward(x.scalar_type() == dtype_ ? x : x.to(dtype_))}};
  }

  Net& state_root() { return *net_; }
  void train(bool on) { net_->train(on); }
  void set_dtype(at::ScalarType dtype) { dtype_ = dtype; }
  void set_activation_checkpointing(bool enabled) { net_->set_activation_checkpointing(enabled); }
  std::vector<LayerDepth> layer_depths() const { return net_->layer_depths(); }

 private:
  std::string misfit(const at::Tensor& x) const {
    const std::string c = std::to_string(in_channels_);
    const std::string hw = size_.exact > 0 ? std::to_string(size_.exact) + ", " + std::to_string(size_.exact) : "H, W";
    std::string rule = "in_channels = " + c;
    if (size_.exact > 0) rule += ", image_size = " + std::to_string(size_.exact);
    else if (size_.min > 1) rule += ", H, W >= " + std::to_string(size_.min);
    return std::string(id_) + ": input '" + input_ + "': expected a floating [B, " + c + ", " + hw + "] image (" +
           rule + "), got " + std::string(c10::toString(x.scalar_type())) + " " + c10::str(x.sizes());
  }

  const char* id_;
  std::shared_ptr<Net> net_;
  int64_t in_channels_;
  std::string input_;
  ImageSizeRule size_;
  at::ScalarType dtype_ = at::kFloat;
};

}  // namespace tp::cpp

#endif  // TP_CPP_IMAGE_CLASSIFIER_H
