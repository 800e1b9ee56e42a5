// org.torchhost.multi_head_cnn: one image, the shared trunk, and two heads: class logits from
// the globally max-pooled features, and a box from the flattened feature map (pooling would throw
// away the position the box needs).
#include <ATen/ops/sigmoid.h>
#include <torch/nn/modules/linear.h>

#include "vision_net.h"

namespace tp::vision {
namespace {

constexpr const char* kId = "org.torchhost.multi_head_cnn";

class MultiHeadCnn : public VisionNet {
 public:
  MultiHeadCnn(std::string input, const CnnConfig& c) : input_(std::move(input)), c_(c) {
    trunk_ = register_module("trunk", std::make_shared<ConvTrunk>(c.in_channels, c.width));
    const int64_t cells = (c.image_size / 8) * (c.image_size / 8);
    cls_head_ = register_module("cls_head", torch::nn::Linear(trunk_->out_channels(), c.num_classes));
    box_head_ = register_module("box_head", torch::nn::Linear(trunk_->out_channels() * cells, 4));
  }

  /// The trunk's three blocks are the checkpoint units.
  void set_activation_checkpointing(bool enabled) override {
    VisionNet::set_activation_checkpointing(enabled);
    trunk_->set_activation_checkpointing(enabled);
  }

  /// The trunk's blocks; both heads are unclaimed (full lr).
  std::vector<tp::cpp::LayerDepth> layer_depths() const override {
    std::vector<tp::cpp::LayerDepth> depths;
    trunk_->append_layer_depths("trunk", 0, depths);
    return depths;
  }

  tp::cpp::Outputs forward(const tp::cpp::Inputs& inputs) override {
    const at::Tensor x = image_input(inputs, input_, c_.in_channels, c_.image_size);
    const at::Tensor map = trunk_->forward(x);
    at::Tensor logits = cls_head_->forward(map.amax({2, 3}));  // global max pool, as small_cnn
    at::Tensor bbox = at::sigmoid(box_head_->forward(map.flatten(1)));
    return {{"logits", std::move(logits)}, {"bbox", std::move(bbox)}};
  }

 private:
  std::string input_;
  CnnConfig c_;
  std::shared_ptr<ConvTrunk> trunk_;
  torch::nn::Linear cls_head_{nullptr};
  torch::nn::Linear box_head_{nullptr};
};

const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "input", TP_CFG_STRING, "\"image\"", "batch field holding the [C, S, S] image"},
    {sizeof(tp_config_key_t), "in_channels", TP_CFG_INT, "3", "image channels"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "3", "number of logits"},
    {sizeof(tp_config_key_t), "width", TP_CFG_INT, "32", "channels of the first block (then 2x, 2x)"},
    {sizeof(tp_config_key_t), "image_size", TP_CFG_INT, "32", "image height and width; a multiple of 8"},
};

const tp_example_input_t kExamples[] = {
    {sizeof(tp_example_input_t), "image", TP_DTYPE_FLOAT32, 3, {3, 32, 32}, 0},
    {sizeof(tp_example_input_t), "label", TP_DTYPE_INT64, 0, {}, 3},
    {sizeof(tp_example_input_t), "bbox", TP_DTYPE_FLOAT32, 1, {4}, 0},
};

}  // namespace

std::shared_ptr<VisionNet> make_multi_head_cnn(const tp::cpp::ConfigReader& cfg) {
  return std::make_shared<MultiHeadCnn>(cfg.get_string("input"), read_cnn_config(cfg, kId));
}

const tp_descriptor_t kMultiHeadCnnDescriptor = tp::cpp::model_descriptor(
    kId, "1.0.0",
    "shared CNN trunk with a class head (logits) and a box head (bbox, sigmoid x0 y0 x1 y1)",
    kKeys, kExamples);

}  // namespace tp::vision
