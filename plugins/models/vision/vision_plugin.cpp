// vision_models: the input checks every model shares, the shared CNN trunk, and tp_entry.
#include <c10/util/StringUtil.h>
#include <ATen/ops/max_pool2d.h>

#include <string>

#include "tp/cpp/guard.h"
#include "tp/cpp/model_adapter.h"
#include "tp/cpp/plugin.h"
#include "vision_net.h"

namespace tp::vision {

using tp::cpp::Failure;

/* Shared pieces declared in vision_net.h */

at::Tensor VisionNet::image_input(const tp::cpp::Inputs& inputs, const std::string& name, int64_t channels,
                                  int64_t size) const {
  const at::Tensor& x = inputs.get(name);
  const bool ok = x.dim() == 4 && x.size(1) == channels && x.size(2) == size && x.size(3) == size &&
                  x.is_floating_point();
  if (!ok)
    throw Failure(TP_ERR_INVALID_ARGUMENT,
                  "input '" + name + "': expected a floating [B, " + std::to_string(channels) + ", " +
                      std::to_string(size) + ", " + std::to_string(size) + "] image, got " +
                      std::string(c10::toString(x.scalar_type())) + " " + c10::str(x.sizes()));
  return x.scalar_type() == dtype_ ? x : x.to(dtype_);
}

at::Tensor VisionNet::flat_input(const tp::cpp::Inputs& inputs, const std::string& name, int64_t features) const {
  const at::Tensor& x = inputs.get(name);
  if (x.dim() < 1 || !x.is_floating_point() || x.numel() != x.size(0) * features)
    throw Failure(TP_ERR_INVALID_ARGUMENT,
                  "input '" + name + "': expected floating [B, ...] with " + std::to_string(features) +
                      " features per sample, got " + std::string(c10::toString(x.scalar_type())) +
                      " " + c10::str(x.sizes()));
  const at::Tensor flat = x.reshape({x.size(0), features});
  return flat.scalar_type() == dtype_ ? flat : flat.to(dtype_);
}

ConvTrunk::ConvTrunk(int64_t in_channels, int64_t width) : out_channels_(2 * width) {
  const int64_t channels[4] = {in_channels, width, 2 * width, 2 * width};
  for (int i = 0; i < 3; ++i) {
    // No conv bias: the BatchNorm shift that follows makes it redundant.
    convs_.push_back(register_module(
        "conv" + std::to_string(i + 1),
        torch::nn::Conv2d(torch::nn::Conv2dOptions(channels[i], channels[i + 1], 3).padding(1).bias(false))));
    norms_.push_back(register_module("bn" + std::to_string(i + 1),
                                     torch::nn::BatchNorm2d(channels[i + 1])));
  }
}

uint32_t ConvTrunk::append_layer_depths(const std::string& prefix, uint32_t first,
                                        std::vector<tp::cpp::LayerDepth>& out) const {
  for (size_t i = 0; i < convs_.size(); ++i) {
    const auto depth = static_cast<uint32_t>(first + i);
    out.push_back({prefix + ".conv" + std::to_string(i + 1), depth});
    out.push_back({prefix + ".bn" + std::to_string(i + 1), depth});
  }
  return first + static_cast<uint32_t>(convs_.size());
}

at::Tensor ConvTrunk::forward(const at::Tensor& x) {
  at::Tensor h = x;
  for (size_t i = 0; i < convs_.size(); ++i) {
    // One checkpoint unit per block: with checkpointing only `h` is kept per block, not the conv,
    // BN and ReLU outputs and the pooling indices. The lambda is kept until backward, so it
    // captures by value.
    h = checkpoint_block({*convs_[i], *norms_[i]}, [this, i](const at::Tensor& in) { return block(i, in); }, h);
  }
  return h;
}

at::Tensor ConvTrunk::block(size_t i, const at::Tensor& x) {
  return at::max_pool2d(norms_[i]->forward(convs_[i]->forward(x)).relu_(), {2, 2});
}

CnnConfig read_cnn_config(const tp::cpp::ConfigReader& cfg, const char* component) {
  CnnConfig c{cfg.get_int("in_channels"), cfg.get_int("num_classes"), cfg.get_int("width"),
              cfg.get_int("image_size")};
  require_config(c.in_channels > 0, component, "in_channels", "must be positive", std::to_string(c.in_channels));
  require_config(c.num_classes > 0, component, "num_classes", "must be positive", std::to_string(c.num_classes));
  require_config(c.width > 0, component, "width", "must be positive", std::to_string(c.width));
  require_config(c.image_size > 0 && c.image_size % 8 == 0, component, "image_size",
                 "must be a positive multiple of 8 (three 2x2 poolings)", std::to_string(c.image_size));
  return c;
}

}  // namespace tp::vision

namespace {
// Each component is a VisionNet factory; tp/cpp/model_adapter.h makes its tp.model/1 table.
using tp::cpp::model_component;
using tp::vision::VisionNet;
const tp::cpp::Component kComponents[] = {
    model_component<VisionNet, tp::vision::kMlpDescriptor, &tp::vision::make_mlp>(),
    model_component<VisionNet, tp::vision::kSmallCnnDescriptor, &tp::vision::make_small_cnn>(),
    model_component<VisionNet, tp::vision::kMultiHeadCnnDescriptor, &tp::vision::make_multi_head_cnn>(),
    model_component<VisionNet, tp::vision::kTwoStreamDescriptor, &tp::vision::make_two_stream>(),
    model_component<VisionNet, tp::vision::kDeepCnnDescriptor, &tp::vision::make_deep_cnn>(),
};
}  // namespace

TP_DEFINE_PLUGIN("vision_models", TP_TORCH_BUILD_INFO_INIT, kComponents)
