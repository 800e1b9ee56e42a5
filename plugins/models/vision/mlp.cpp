// org.torchhost.mlp: a multilayer perceptron over one flattened input field.
#include <torch/nn/functional/dropout.h>
#include <torch/nn/modules/linear.h>

#include "vision_net.h"

namespace tp::vision {
namespace {

constexpr const char* kMlpId = "org.torchhost.mlp";

/// flatten -> [Linear -> ReLU -> Dropout] per hidden size -> Linear(num_classes).
class Mlp : public VisionNet {
 public:
  Mlp(std::string input, int64_t in_features, const std::vector<int64_t>& hidden,
      int64_t num_classes, double dropout)
      : input_(std::move(input)), in_features_(in_features), dropout_(dropout) {
    int64_t width = in_features;
    for (size_t i = 0; i < hidden.size(); ++i) {
      layers_.push_back(register_module("fc" + std::to_string(i + 1), torch::nn::Linear(width, hidden[i])));
      width = hidden[i];
    }
    head_ = register_module("head", torch::nn::Linear(width, num_classes));
  }

  /// Each hidden layer (Linear, ReLU, dropout) is a checkpoint unit; without hidden layers there
  /// is nothing to checkpoint.
  void set_activation_checkpointing(bool enabled) override {
    if (enabled && layers_.empty())
      throw tp::cpp::Failure(TP_ERR_UNSUPPORTED, std::string(kMlpId) + ": hidden = [] has no hidden layers to "
                                                 "checkpoint (the model is one Linear layer)");
    VisionNet::set_activation_checkpointing(enabled);
  }

  /// The hidden layers fc1, fc2, ... at depths 0, 1, ...; none with hidden = [] (one Linear).
  std::vector<tp::cpp::LayerDepth> layer_depths() const override {
    std::vector<tp::cpp::LayerDepth> depths;
    for (size_t i = 0; i < layers_.size(); ++i) depths.push_back({"fc" + std::to_string(i + 1), static_cast<uint32_t>(i)});
    return depths;
  }

  tp::cpp::Outputs forward(const tp::cpp::Inputs& inputs) override {
    at::Tensor h = flat_input(inputs, input_, in_features_);
    for (auto& layer : layers_)  // the lambda is kept until backward: capture by value
      h = checkpoint_block(*layer, [this, l = layer.ptr()](const at::Tensor& x) { return hidden_block(*l, x); }, h);
    return {{"logits", head_->forward(h)}};
  }

 private:
  /// Linear -> ReLU -> dropout. The dropout mask comes from the global generator, which a
  /// checkpointed recompute rewinds, so it draws the same mask again.
  at::Tensor hidden_block(torch::nn::LinearImpl& layer, const at::Tensor& x) const {
    at::Tensor h = layer.forward(x).relu_();
    // Functional dropout: no module, so no state entry; train/eval comes from is_training().
    if (dropout_ > 0.0)
      h = torch::nn::functional::dropout(h, torch::nn::functional::DropoutFuncOptions().p(dropout_).training(is_training()));
    return h;
  }

  std::string input_;
  int64_t in_features_;
  double dropout_;
  std::vector<torch::nn::Linear> layers_;
  torch::nn::Linear head_{nullptr};
};

const tp_config_key_t kMlpKeys[] = {
    {sizeof(tp_config_key_t), "input", TP_CFG_STRING, "\"image\"", "batch field to flatten and classify"},
    {sizeof(tp_config_key_t), "hidden", TP_CFG_INT_ARRAY, "[256, 128]", "hidden layer widths, input side first"},
    {sizeof(tp_config_key_t), "in_features", TP_CFG_INT, "3072", "elements per sample of the input (3*32*32)"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "3", "number of logits"},
    {sizeof(tp_config_key_t), "dropout", TP_CFG_FLOAT, "0.0", "dropout probability after each hidden layer"},
};

const tp_example_input_t kMlpExamples[] = {kImageExample, kLabelExample};

}  // namespace

std::shared_ptr<VisionNet> make_mlp(const tp::cpp::ConfigReader& cfg) {
  const int64_t in_features = cfg.get_int("in_features");
  const int64_t num_classes = cfg.get_int("num_classes");
  const std::vector<int64_t> hidden = cfg.get_int_array("hidden");
  const double dropout = cfg.get_float("dropout");
  require_config(in_features > 0, kMlpId, "in_features", "must be positive", std::to_string(in_features));
  require_config(num_classes > 0, kMlpId, "num_classes", "must be positive", std::to_string(num_classes));
  for (int64_t h : hidden) require_config(h > 0, kMlpId, "hidden", "entries must be positive", std::to_string(h));
  require_config(dropout >= 0.0 && dropout < 1.0, kMlpId, "dropout", "must be in [0, 1)", std::to_string(dropout));
  return std::make_shared<Mlp>(cfg.get_string("input"), in_features, hidden, num_classes, dropout);
}

const tp_descriptor_t kMlpDescriptor = tp::cpp::model_descriptor(
    kMlpId, "1.0.0",
    "multilayer perceptron over one flattened input; outputs logits",
    kMlpKeys, kMlpExamples);

}  // namespace tp::vision
