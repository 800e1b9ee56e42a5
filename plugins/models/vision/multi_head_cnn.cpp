// org.torchhost.multi_head_cnn: one image, the shared trunk, and two heads: class logits from
// the globally max-pooled features, and a box from the flattened feature map (pooling would throw
// away the position the box needs).
#include <ATen/ops/sigmoid.h>
#include <torch/nn/modules/linear.h>

#include "vision_net.h"

namespace tp::vision {
namespace {

constexpr const char* kMultiHeadCnnId = "org.torchhost.multi_head_cnn";

class MultiHeadCnn : public TrunkNet {
 public:
  MultiHeadCnn(std::string input, const CnnConfig& c) : TrunkNet(std::move(input), c) {
    const int64_t cells = (c.image_size / 8) * (c.image_size / 8);
    cls_head_ = register_module("cls_head", torch::nn::Linear(trunk_channels(), c.num_classes));
    box_head_ = register_module("box_head", torch::nn::Linear(trunk_channels() * cells, 4));
  }

  tp::cpp::Outputs forward(const tp::cpp::Inputs& inputs) override {
    const at::Tensor map = feature_map(inputs);
    at::Tensor logits = cls_head_->forward(map.amax({2, 3}));  // global max pool, as small_cnn
    at::Tensor bbox = at::sigmoid(box_head_->forward(map.flatten(1)));
    return {{"logits", std::move(logits)}, {"bbox", std::move(bbox)}};
  }

 private:
  torch::nn::Linear cls_head_{nullptr};
  torch::nn::Linear box_head_{nullptr};
};

const tp_example_input_t kMultiHeadCnnExamples[] = {kImageExample, kLabelExample, kBoxExample};

}  // namespace

std::shared_ptr<VisionNet> make_multi_head_cnn(const tp::cpp::ConfigReader& cfg) {
  return std::make_shared<MultiHeadCnn>(cfg.get_string("input"), read_cnn_config(cfg, kMultiHeadCnnId));
}

const tp_descriptor_t kMultiHeadCnnDescriptor = tp::cpp::model_descriptor(
    kMultiHeadCnnId, "1.0.0",
    "shared CNN trunk with a class head (logits) and a box head (bbox, sigmoid x0 y0 x1 y1)",
    kTrunkNetKeys, kMultiHeadCnnExamples);

}  // namespace tp::vision
