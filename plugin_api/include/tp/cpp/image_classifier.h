// torchhost C++ helpers for Tier T model authors: the model component of an image classifier,
// for tp/cpp/model_adapter.h. It reads one image field of the batch, checks its shape, casts it to
// the model's floating dtype and returns "logits"; the network `Net` (a torch::nn::Module) is the
// state the host trains, under its own parameter names.
//
//   std::shared_ptr<tp::cpp::ImageClassifier<ResNet>> make(const tp::cpp::ConfigReader& cfg) {
//     const tp::cpp::ImageClassifierConfig common = tp::cpp::read_image_classifier_config(cfg, kId);
//     const ResNetOptions o = read_options(cfg, common);   // the network's own keys
//     return std::make_shared<tp::cpp::ImageClassifier<ResNet>>(kId, std::make_shared<ResNet>(o), common);
//   }
//   const tp_descriptor_t kDescriptor =
//       tp::cpp::model_descriptor(kId, "1.0.0", "torchvision ResNet", kKeys, tp::cpp::kImageNetExamples);
//   const tp::cpp::Component kComponents[] = {
//       tp::cpp::model_component<tp::cpp::ImageClassifier<ResNet>, kDescriptor, &make>()};
//
// The schema (kKeys) declares `num_classes`, `in_channels` and `input` (kImageInputKey) besides the
// network's own keys; read_image_classifier_config reads and checks those three.
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

#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/model_adapter.h"

namespace tp::cpp {

/// The example inputs of an image classifier with the usual defaults (in_channels 3,
/// num_classes 1000) at ImageNet's 224 x 224: a float32 "image" [3, 224, 224] and an int64
/// "label" in [0, 1000). Static: they describe the default config, which `host plugins check`
/// and profiling use with them.
inline constexpr tp_example_input_t kImageNetExamples[] = {
    {sizeof(tp_example_input_t), "image", TP_DTYPE_FLOAT32, 3, {3, 224, 224}, 0},
    {sizeof(tp_example_input_t), "label", TP_DTYPE_INT64, 0, {}, 1000},
};

/// The schema key `input` of an image classifier: the batch field holding the image.
inline constexpr tp_config_key_t kImageInputKey = {sizeof(tp_config_key_t), "input", TP_CFG_STRING, "\"image\"",
                                                   "batch field holding the [C, H, W] image"};

/// What every image classifier reads besides its network's own keys.
struct ImageClassifierConfig {
  int64_t num_classes;  ///< `num_classes`: the number of logits, > 0
  int64_t in_channels;  ///< `in_channels`: image channels, > 0
  std::string input;    ///< `input`: the batch field holding the image
};

/// Reads `num_classes`, `in_channels` and `input`; throws Failure(TP_ERR_CONFIG,
/// "<id>: num_classes must be positive, got 0") (tp::cpp::require_config) for a count below 1.
inline ImageClassifierConfig read_image_classifier_config(const ConfigReader& cfg, const char* id) {
  ImageClassifierConfig c{cfg.get_int("num_classes"), cfg.get_int("in_channels"), cfg.get_string("input")};
  require_config(c.num_classes > 0, id, "num_classes", "must be positive", std::to_string(c.num_classes));
  require_config(c.in_channels > 0, id, "in_channels", "must be positive", std::to_string(c.in_channels));
  return c;
}

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
  /// The same with `in_channels` and `input` from read_image_classifier_config.
  ImageClassifier(const char* id, std::shared_ptr<Net> net, const ImageClassifierConfig& config, ImageSizeRule size = {})
      : ImageClassifier(id, std::move(net), config.in_channels, config.input, size) {}

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
