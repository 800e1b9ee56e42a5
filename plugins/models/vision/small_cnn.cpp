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

constexpr const char* kSmallCnnId = "org.torchhost.small_cnn";

class SmallCnn : public TrunkNet {
 public:
  SmallCnn(std::string input, const CnnConfig& c) : TrunkNet(std::move(input), c) {
    head_ = register_module("head", torch::nn::Linear(trunk_channels(), c.num_classes));
  }

  tp::cpp::Outputs forward(const tp::cpp::Inputs& inputs) override {
    const at::Tensor features = feature_map(inputs).amax({2, 3});  // global max pool
    return {{"logits", head_->forward(features)}};
  }

 private:
  torch::nn::Linear head_{nullptr};
};

const tp_example_input_t kSmallCnnExamples[] = {kImageExample, kLabelExample};

}  // namespace

std::shared_ptr<VisionNet> make_small_cnn(const tp::cpp::ConfigReader& cfg) {
  return std::make_shared<SmallCnn>(cfg.get_string("input"), read_cnn_config(cfg, kSmallCnnId));
}

const tp_descriptor_t kSmallCnnDescriptor = tp::cpp::model_descriptor(
    kSmallCnnId, "1.0.0",
    "three conv-BN-ReLU-pool blocks, global max pool, linear; outputs logits",
    kTrunkNetKeys, kSmallCnnExamples);

}  // namespace tp::vision
