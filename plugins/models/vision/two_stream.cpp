// org.torchhost.two_stream: two images, one trunk each (no weight sharing: the streams may see
// different modalities), features concatenated, then a class head and a box head.
#include <ATen/ops/cat.h>
#include <ATen/ops/sigmoid.h>
#include <torch/nn/modules/linear.h>

#include "vision_net.h"

namespace tp::vision {
namespace {

constexpr const char* kTwoStreamId = "org.torchhost.two_stream";

class TwoStream : public VisionNet {
 public:
  TwoStream(std::vector<std::string> inputs, const CnnConfig& c) : inputs_(std::move(inputs)), c_(c) {
    trunk_a_ = register_module("trunk_a", std::make_shared<ConvTrunk>(c.in_channels, c.width));
    trunk_b_ = register_module("trunk_b", std::make_shared<ConvTrunk>(c.in_channels, c.width));
    const int64_t channels = 2 * trunk_a_->out_channels();
    const int64_t cells = (c.image_size / 8) * (c.image_size / 8);
    cls_head_ = register_module("cls_head", torch::nn::Linear(channels, c.num_classes));
    box_head_ = register_module("box_head", torch::nn::Linear(channels * cells, 4));
  }

  /// Both trunks' blocks are the checkpoint units.
  void set_activation_checkpointing(bool enabled) override {
    VisionNet::set_activation_checkpointing(enabled);
    trunk_a_->set_activation_checkpointing(enabled);
    trunk_b_->set_activation_checkpointing(enabled);
  }

  /// The two trunks side by side (block i of each at depth i-1); the heads are unclaimed.
  std::vector<tp::cpp::LayerDepth> layer_depths() const override {
    std::vector<tp::cpp::LayerDepth> depths;
    trunk_a_->append_layer_depths("trunk_a", 0, depths);
    trunk_b_->append_layer_depths("trunk_b", 0, depths);
    return depths;
  }

  tp::cpp::Outputs forward(const tp::cpp::Inputs& inputs) override {
    const at::Tensor a = image_input(inputs, inputs_[0], c_.in_channels, c_.image_size);
    const at::Tensor b = image_input(inputs, inputs_[1], c_.in_channels, c_.image_size);
    if (a.size(0) != b.size(0))
      throw tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT,
                             "inputs '" + inputs_[0] + "' and '" + inputs_[1] + "' have batch sizes " +
                                 std::to_string(a.size(0)) + " and " + std::to_string(b.size(0)));
    const at::Tensor map = at::cat({trunk_a_->forward(a), trunk_b_->forward(b)}, 1);
    at::Tensor logits = cls_head_->forward(map.amax({2, 3}));  // global max pool, as small_cnn
    at::Tensor bbox = at::sigmoid(box_head_->forward(map.flatten(1)));
    return {{"logits", std::move(logits)}, {"bbox", std::move(bbox)}};
  }

 private:
  std::vector<std::string> inputs_;
  CnnConfig c_;
  std::shared_ptr<ConvTrunk> trunk_a_;
  std::shared_ptr<ConvTrunk> trunk_b_;
  torch::nn::Linear cls_head_{nullptr};
  torch::nn::Linear box_head_{nullptr};
};

const tp_config_key_t kTwoStreamKeys[] = {
    {sizeof(tp_config_key_t), "inputs", TP_CFG_STRING_ARRAY, "[\"image\", \"image2\"]",
     "the two batch fields, one [C, S, S] image each"},
    {sizeof(tp_config_key_t), "in_channels", TP_CFG_INT, "3", "channels of each image"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "3", "number of logits"},
    {sizeof(tp_config_key_t), "width", TP_CFG_INT, "32", "channels of each trunk's first block (then 2x, 2x)"},
    {sizeof(tp_config_key_t), "image_size", TP_CFG_INT, "32", "image height and width; a multiple of 8"},
};

const tp_example_input_t kTwoStreamExamples[] = {
    kImageExample,
    {sizeof(tp_example_input_t), "image2", TP_DTYPE_FLOAT32, 3, {3, 32, 32}, 0},
    kLabelExample,
    kBoxExample,
};

}  // namespace

std::shared_ptr<VisionNet> make_two_stream(const tp::cpp::ConfigReader& cfg) {
  std::vector<std::string> inputs = cfg.get_string_array("inputs");
  require_config(inputs.size() == 2, kTwoStreamId, "inputs", "must name exactly two fields",
                 std::to_string(inputs.size()) + " names");
  return std::make_shared<TwoStream>(std::move(inputs), read_cnn_config(cfg, kTwoStreamId));
}

const tp_descriptor_t kTwoStreamDescriptor = tp::cpp::model_descriptor(
    kTwoStreamId, "1.0.0",
    "two images, one CNN trunk each, fused; outputs logits and bbox (sigmoid x0 y0 x1 y1)",
    kTwoStreamKeys, kTwoStreamExamples);

}  // namespace tp::vision
