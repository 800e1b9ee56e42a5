// org.torchhost.deep_cnn: a stem and `depth` conv3x3-BN-ReLU blocks at constant width and full
// resolution (optionally residual), global max pooling and a linear classifier. Deep and wide
// feature maps make its activations, not its weights, dominate training memory, which is what
// activation checkpointing trades for time: each block (and the stem) is a checkpoint unit.
//
// Activation memory per image in training, float32, S x S input, without checkpointing: per
// block the conv output and the ReLU output (the ReLU runs in place on the BN output), about
// 2 * width * S^2 * 4 bytes; with checkpointing only the block's input, width * S^2 * 4 bytes.
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>

#include "vision_net.h"

namespace tp::vision {
namespace {

constexpr const char* kDeepCnnId = "org.torchhost.deep_cnn";

/// conv3x3 (no bias) - BatchNorm - ReLU, `in` -> `out` channels, same resolution. With
/// `residual` (in == out): ReLU(x + BN(conv(x))).
class ConvBnBlockImpl : public torch::nn::Module {
 public:
  ConvBnBlockImpl(int64_t in, int64_t out, bool residual) : residual_(residual) {
    // No conv bias: the BatchNorm shift that follows makes it redundant.
    conv_ = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1).bias(false)));
    bn_ = register_module("bn", torch::nn::BatchNorm2d(out));
  }
  /// Reads `x` only: the sum is a new tensor, so the in-place ReLU never touches the input.
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = bn_->forward(conv_->forward(x));
    if (residual_) y = y + x;
    return y.relu_();
  }

 private:
  bool residual_;
  torch::nn::Conv2d conv_{nullptr};
  torch::nn::BatchNorm2d bn_{nullptr};
};
TORCH_MODULE(ConvBnBlock);

class DeepCnn : public VisionNet {
 public:
  DeepCnn(std::string input, int64_t in_channels, int64_t num_classes, int64_t width, int64_t depth,
          int64_t image_size, bool residual)
      : input_(std::move(input)), in_channels_(in_channels), image_size_(image_size) {
    stem_ = register_module("stem", ConvBnBlock(in_channels, width, /*residual=*/false));
    blocks_ = register_module("blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < depth; ++i) {
      ConvBnBlock block(width, width, residual);
      blocks_->push_back(block);
      typed_blocks_.push_back(block);
    }
    head_ = register_module("head", torch::nn::Linear(width, num_classes));
  }

  std::vector<tp::cpp::LayerDepth> layer_depths() const override {
    std::vector<tp::cpp::LayerDepth> depths = {{"stem", 0}};
    for (size_t i = 0; i < typed_blocks_.size(); ++i)
      depths.push_back({"blocks." + std::to_string(i), static_cast<uint32_t>(i + 1)});
    return depths;
  }

  tp::cpp::Outputs forward(const tp::cpp::Inputs& inputs) override {
    at::Tensor h = image_input(inputs, input_, in_channels_, image_size_);
    h = run_block(stem_, h);
    for (const ConvBnBlock& block : typed_blocks_) h = run_block(block, h);
    return {{"logits", head_->forward(h.amax({2, 3}))}};  // global max pool, as small_cnn
  }

 private:
  /// One checkpoint unit (when the switch is on): keeps `x`, recomputes the rest in backward.
  at::Tensor run_block(const ConvBnBlock& block, const at::Tensor& x) const {
    return checkpoint_block(*block, [b = block.ptr()](const at::Tensor& in) { return b->forward(in); }, x);
  }

  std::string input_;
  int64_t in_channels_;
  int64_t image_size_;
  ConvBnBlock stem_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};  // registered, for state names "blocks.<i>.conv.weight"
  std::vector<ConvBnBlock> typed_blocks_;  // the same modules, typed
  torch::nn::Linear head_{nullptr};
};

const tp_config_key_t kDeepCnnKeys[] = {
    {sizeof(tp_config_key_t), "input", TP_CFG_STRING, "\"image\"", "batch field holding the [C, S, S] image"},
    {sizeof(tp_config_key_t), "in_channels", TP_CFG_INT, "3", "image channels"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "3", "number of logits"},
    {sizeof(tp_config_key_t), "width", TP_CFG_INT, "32", "channels of the stem and of every block"},
    {sizeof(tp_config_key_t), "depth", TP_CFG_INT, "8", "number of conv-BN-ReLU blocks after the stem"},
    {sizeof(tp_config_key_t), "image_size", TP_CFG_INT, "32", "image height and width"},
    {sizeof(tp_config_key_t), "residual", TP_CFG_BOOL, "true", "blocks add their input: ReLU(x + BN(conv(x)))"},
};

const tp_example_input_t kDeepCnnExamples[] = {kImageExample, kLabelExample};

}  // namespace

std::shared_ptr<VisionNet> make_deep_cnn(const tp::cpp::ConfigReader& cfg) {
  const int64_t in_channels = cfg.get_int("in_channels");
  const int64_t num_classes = cfg.get_int("num_classes");
  const int64_t width = cfg.get_int("width");
  const int64_t depth = cfg.get_int("depth");
  const int64_t image_size = cfg.get_int("image_size");
  require_config(in_channels > 0, kDeepCnnId, "in_channels", "must be positive", std::to_string(in_channels));
  require_config(num_classes > 0, kDeepCnnId, "num_classes", "must be positive", std::to_string(num_classes));
  require_config(width > 0, kDeepCnnId, "width", "must be positive", std::to_string(width));
  require_config(depth >= 0, kDeepCnnId, "depth", "must be zero or more", std::to_string(depth));
  require_config(image_size > 0, kDeepCnnId, "image_size", "must be positive", std::to_string(image_size));
  return std::make_shared<DeepCnn>(cfg.get_string("input"), in_channels, num_classes, width, depth, image_size,
                                   cfg.get_bool("residual"));
}

const tp_descriptor_t kDeepCnnDescriptor = tp::cpp::model_descriptor(
    kDeepCnnId, "1.0.0",
    "stem and `depth` conv-BN-ReLU blocks at constant width (optionally residual), global max pool, "
    "linear; outputs logits; every block checkpointable",
    kDeepCnnKeys, kDeepCnnExamples);

}  // namespace tp::vision
