// org.torchhost.resnet: the module (architecture and initialisation), following
// torchvision/models/resnet.py line by line so that names, shapes and parameter counts agree
// (tests/plugins/models checks them against a plain torch.nn replica).
#include "resnet_net.h"

#include <ATen/ops/adaptive_avg_pool2d.h>
#include <torch/nn/init.h>

#include <algorithm>
#include <string>

#include "tp/cpp/fused_norm.h"
#include "tp/cpp/fused_pool.h"
#include "tp/cpp/model_layers.h"

namespace tp::resnet {
namespace {

using torch::nn::BatchNorm2d;
using torch::nn::Conv2d;
using torch::nn::Conv2dOptions;

/// Convolutions are never biased: the BatchNorm shift that follows makes a bias redundant. A
/// dilated kernel is padded by as much more, so the output keeps the size of the undilated one.
Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t dilation = 1) {
  return Conv2d(
      Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2 * dilation).dilation(dilation).bias(false));
}

/// conv1x1(stride) - BN projecting the identity when the shape changes: a Sequential registered as
/// "downsample" ("downsample.0" the conv, "downsample.1" the BN: torchvision's state names), and
/// the two modules held apart, so that forward can run the BN through tp::cpp::batch_norm (fused
/// where `fused_norm` and the host's CUDA ops allow, else the module path: bn(conv(x)), what the
/// Sequential computes). Empty (`sequence` null) when the shape does not change.
struct Downsample {
  torch::nn::Sequential sequence{nullptr};
  Conv2d conv{nullptr};
  BatchNorm2d bn{nullptr};

  explicit operator bool() const { return !sequence.is_empty(); }
  at::Tensor forward(const at::Tensor& x, bool fused_norm) {
    return tp::cpp::batch_norm(bn, conv->forward(x), fused_norm);
  }
};

Downsample downsample_for(int64_t in_planes, int64_t out_planes, int64_t stride) {
  if (stride == 1 && in_planes == out_planes) return {};
  Downsample d;
  d.conv = conv(in_planes, out_planes, 1, stride);
  d.bn = BatchNorm2d(out_planes);
  d.sequence = torch::nn::Sequential(d.conv, d.bn);
  return d;
}

/// ResNet-18/34 block: 3x3(stride) - BN - ReLU - 3x3 - BN, + identity, ReLU. Expansion 1.
/// BN - ReLU and BN + identity - ReLU go through tp::cpp::batch_norm_relu (fused where `fused_norm`
/// and the host's CUDA ops allow, else the module path), the downsample's BN through
/// tp::cpp::batch_norm.
class BasicBlock : public ResidualBlock {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlock(int64_t in_planes, int64_t planes, int64_t stride, bool fused_norm, double drop_path_rate)
      : ResidualBlock(drop_path_rate), fused_norm_(fused_norm) {
    conv1_ = register_module("conv1", conv(in_planes, planes, 3, stride));
    bn1_ = register_module("bn1", BatchNorm2d(planes));
    conv2_ = register_module("conv2", conv(planes, planes, 3, 1));
    bn2_ = register_module("bn2", BatchNorm2d(planes));
    downsample_ = downsample_for(in_planes, planes * kExpansion, stride);
    if (downsample_) register_module("downsample", downsample_.sequence);
  }
  at::Tensor forward(const at::Tensor& x) override {
    const at::Tensor out = tp::cpp::batch_norm_relu(bn1_, conv1_->forward(x), {}, fused_norm_);
    // Never in place on `x` (the block's input, kept by checkpointing): batch_norm_relu reads it.
    const at::Tensor identity = downsample_ ? downsample_.forward(x, fused_norm_) : x;
    return residual_end(bn2_, conv2_->forward(out), identity, fused_norm_);
  }
  BatchNorm2d& last_norm() override { return bn2_; }

 private:
  bool fused_norm_;
  Conv2d conv1_{nullptr}, conv2_{nullptr};
  BatchNorm2d bn1_{nullptr}, bn2_{nullptr};
  Downsample downsample_;
};

/// ResNet-50 block, torchvision's "v1.5": 1x1 - BN - ReLU - 3x3(stride, dilation) - BN - ReLU -
/// 1x1(4x) - BN, + identity, ReLU. The stride sits on the 3x3 conv (the original paper put it on the first
/// 1x1), which torchvision reports as about 0.5% more top-1 accuracy for a little more compute.
/// BN - ReLU, BN + identity - ReLU and the downsample as in BasicBlock.
class Bottleneck : public ResidualBlock {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck(int64_t in_planes, int64_t planes, int64_t stride, int64_t dilation, bool fused_norm,
             double drop_path_rate)
      : ResidualBlock(drop_path_rate), fused_norm_(fused_norm) {
    conv1_ = register_module("conv1", conv(in_planes, planes, 1, 1));
    bn1_ = register_module("bn1", BatchNorm2d(planes));
    conv2_ = register_module("conv2", conv(planes, planes, 3, stride, dilation));
    bn2_ = register_module("bn2", BatchNorm2d(planes));
    conv3_ = register_module("conv3", conv(planes, planes * kExpansion, 1, 1));
    bn3_ = register_module("bn3", BatchNorm2d(planes * kExpansion));
    downsample_ = downsample_for(in_planes, planes * kExpansion, stride);
    if (downsample_) register_module("downsample", downsample_.sequence);
  }
  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor out = tp::cpp::batch_norm_relu(bn1_, conv1_->forward(x), {}, fused_norm_);
    out = tp::cpp::batch_norm_relu(bn2_, conv2_->forward(out), {}, fused_norm_);
    const at::Tensor identity = downsample_ ? downsample_.forward(x, fused_norm_) : x;
    return residual_end(bn3_, conv3_->forward(out), identity, fused_norm_);
  }
  BatchNorm2d& last_norm() override { return bn3_; }

 private:
  bool fused_norm_;
  Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  Downsample downsample_;
};

/// Blocks per stage (torchvision's `layers`).
std::vector<int64_t> stage_blocks(int64_t depth) {
  if (depth == 18) return {2, 2, 2, 2};
  return {3, 4, 6, 3};  // 34 and 50
}

}  // namespace

at::Tensor ResidualBlock::residual_end(torch::nn::BatchNorm2d& bn, const at::Tensor& branch,
                                       const at::Tensor& identity, bool fused_norm) {
  if (drop_path_rate_ == 0.0 || !is_training()) return tp::cpp::batch_norm_relu(bn, branch, identity, fused_norm);
  // The mask sits between BatchNorm and the add, so the fused BatchNorm + add + ReLU cannot take
  // it; BatchNorm alone still fuses. In place only on the product, a fresh tensor.
  at::Tensor out = tp::cpp::stochastic_depth(tp::cpp::batch_norm(bn, branch, fused_norm), drop_path_rate_, true);
  out += identity;
  return out.relu_();
}

ResNet::ResNet(const ResNetOptions& options)
    : bottleneck_(options.depth == 50), fused_norm_(options.fused_norm), drop_path_rate_(options.drop_path_rate) {
  for (const bool dilate : options.replace_stride_with_dilation)
    TORCH_CHECK(!dilate || bottleneck_, "ResNet-", options.depth, ": dilation needs Bottleneck blocks (depth 50)");
  conv1_ = register_module(
      "conv1", Conv2d(Conv2dOptions(options.in_channels, 64, 7).stride(2).padding(3).bias(false)));
  bn1_ = register_module("bn1", BatchNorm2d(64));
  const std::vector<int64_t> blocks = stage_blocks(options.depth);
  for (const int64_t n : blocks) total_blocks_ += n;
  const int64_t planes[4] = {64, 128, 256, 512};
  for (int i = 0; i < 4; ++i)
    make_layer(i + 1, planes[i], blocks[i], i == 0 ? 1 : 2, i > 0 && options.replace_stride_with_dilation[i - 1]);
  if (options.fc)
    fc_ = register_module("fc", torch::nn::Linear(512 * (bottleneck_ ? Bottleneck::kExpansion : 1), options.num_classes));

  // torchvision's initialisation. Construction already drew LibTorch's defaults; these draws
  // replace them (the generator is the host-seeded global one, so it stays reproducible).
  torch::NoGradGuard no_grad;
  for (const auto& module : modules(/*include_self=*/false)) {
    if (auto* c = module->as<torch::nn::Conv2dImpl>()) {
      torch::nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
    } else if (auto* bn = module->as<torch::nn::BatchNorm2dImpl>()) {
      bn->weight.fill_(1.0);
      bn->bias.zero_();
    }
  }
  if (options.zero_init_residual)
    for (const auto& block : blocks_) block->last_norm()->weight.zero_();
}

void ResNet::make_layer(int index, int64_t planes, int64_t blocks, int64_t stride, bool dilate) {
  auto layer = register_module("layer" + std::to_string(index), torch::nn::ModuleList());
  const int64_t previous_dilation = dilation_;
  if (dilate) {
    dilation_ *= stride;
    stride = 1;
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t s = b == 0 ? stride : 1;
    // timm's make_blocks, "stochastic depth linear decay rule", in its order of operations.
    const double rate = drop_path_rate_ * static_cast<double>(blocks_.size()) / static_cast<double>(total_blocks_ - 1);
    std::shared_ptr<ResidualBlock> block;
    if (bottleneck_) {
      block = std::make_shared<Bottleneck>(in_planes_, planes, s, b == 0 ? previous_dilation : dilation_, fused_norm_,
                                           rate);
      in_planes_ = planes * Bottleneck::kExpansion;
    } else {
      block = std::make_shared<BasicBlock>(in_planes_, planes, s, fused_norm_, rate);
      in_planes_ = planes * BasicBlock::kExpansion;
    }
    layer->push_back(block);  // named "<b>": state "layer<index>.<b>.conv1.weight"
    blocks_.push_back(block);
    block_names_.push_back("layer" + std::to_string(index) + "." + std::to_string(b));
  }
  stage_ends_.push_back(blocks_.size());
}

std::vector<tp::cpp::LayerDepth> ResNet::layer_depths() const {
  std::vector<tp::cpp::LayerDepth> depths = {{"conv1", 0}, {"bn1", 0}};
  for (size_t i = 0; i < block_names_.size(); ++i) depths.push_back({block_names_[i], static_cast<uint32_t>(i + 1)});
  return depths;
}

std::vector<double> ResNet::drop_path_rates() const {
  std::vector<double> rates;
  for (const auto& block : blocks_) rates.push_back(block->drop_path_rate());
  return rates;
}

at::Tensor ResNet::stem(const at::Tensor& x) {
  return tp::cpp::max_pool_3x3_s2(tp::cpp::batch_norm_relu(bn1_, conv1_->forward(x), {}, fused_norm_), fused_norm_);
}

std::vector<at::Tensor> ResNet::stages(const at::Tensor& x) {
  // Checkpoint units capture by value: the lambdas live until backward.
  at::Tensor h = checkpoint_block({*conv1_, *bn1_}, [this](const at::Tensor& in) { return stem(in); }, x);
  std::vector<at::Tensor> outputs;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const auto block = blocks_[i];
    h = checkpoint_block(*block, [block](const at::Tensor& in) { return block->forward(in); }, h);
    if (std::find(stage_ends_.begin(), stage_ends_.end(), i + 1) != stage_ends_.end()) outputs.push_back(h);
  }
  return outputs;
}

at::Tensor ResNet::forward(const at::Tensor& x) {
  TORCH_CHECK(fc_, "ResNet::forward: built without fc (a backbone); read stages() instead");
  return fc_->forward(at::adaptive_avg_pool2d(stages(x).back(), {1, 1}).flatten(1));
}

}  // namespace tp::resnet
