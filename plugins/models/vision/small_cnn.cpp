// org.torchhost.small_cnn: the shared three-block trunk, global max pooling and a linear
// classifier. 56,675 parameters at the defaults; trains to >95% on 32x32 shape images in a few
// epochs on two CPU cores.
//
// Global MAX pooling, not average: a shape's class shows in a few local features (a corner, a
// straight edge) that averaging over the map dilutes. On the shapes data (random colours,
// sizes and rotations) a replica with average pooling reached 67% validation accuracy after 5
// epochs (AdamW 3e-3, batch 64), the same net with max pooling 99.3% after 3 and 100% after 5.
#include <torch/nn/modules/linear.h>

#include "vision_net.h"

namespace tp::vision {
namespace {

constexpr const char* kId = "org.torchhost.small_cnn";

class SmallCnn : public VisionNet {
 public:
  SmallCnn(std::string input, const CnnConfig& c) : input_(std::move(input)), c_(c) {
    trunk_ = register_module("trunk", std::make_shared<ConvTrunk>(c.in_channels, c.width));
    head_ = register_module("head", torch::nn::Linear(trunk_->out_channels(), c.num_classes));
  }

  /// The trunk's three blocks are the checkpoint units.
  void set_activation_checkpointing(bool enabled) override {
    VisionNet::set_activation_checkpointing(enabled);
    trunk_->set_activation_checkpointing(enabled);
  }

  std::vector<tp::cpp::LayerDepth> layer_depths() const override {
    std::vector<tp::cpp::LayerDepth> depths;
    trunk_->append_layer_depths("trunk", 0, depths);
    return depths;
  }

  tp::cpp::Outputs forward(const tp::cpp::Inputs& inputs) override {
    const at::Tensor x = image_input(inputs, input_, c_.in_channels, c_.image_size);
    const at::Tensor features = trunk_->forward(x).amax({2, 3});  // global max pool
    return {{"logits", head_->forward(features)}};
  }

 private:
  std::string input_;
  CnnConfig c_;
  std::shared_ptr<ConvTrunk> trunk_;
  torch::nn::Linear head_{nullptr};
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
};

}  // namespace

std::shared_ptr<VisionNet> make_small_cnn(const tp::cpp::ConfigReader& cfg) {
  return std::make_shared<SmallCnn>(cfg.get_string("input"), read_cnn_config(cfg, kId));
}

const tp_descriptor_t kSmallCnnDescriptor = tp::cpp::model_descriptor(
    kId, "1.0.0",
    "three conv-BN-ReLU-pool blocks, global max pool, linear; outputs logits",
    kKeys, kExamples);

}  // namespace tp::vision
