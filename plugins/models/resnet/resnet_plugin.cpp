// resnet: the component class of org.torchhost.resnet, its descriptor and tp_entry. The C shell
// (state lent to the host, to_device keeping num_batches_tracked int64, output ownership) is
// tp/cpp/model_adapter.h, shared with the other model plugins.
#include <c10/util/StringUtil.h>

#include <memory>
#include <string>

#include "resnet_net.h"
#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/model_adapter.h"
#include "tp/iface/model.h"

namespace tp::resnet {
namespace {

using tp::cpp::Failure;

constexpr const char* kId = "org.torchhost.resnet";

void require(bool ok, const char* key, const char* what, const std::string& got) {
  if (!ok) throw Failure(TP_ERR_CONFIG, std::string(kId) + ": " + key + " " + what + ", got " + got);
}

ResNetOptions read_options(const tp::cpp::ConfigReader& cfg) {
  ResNetOptions o;
  o.depth = cfg.get_int("depth");
  o.num_classes = cfg.get_int("num_classes");
  o.in_channels = cfg.get_int("in_channels");
  o.zero_init_residual = cfg.get_bool("zero_init_residual");
  require(o.depth == 18 || o.depth == 34 || o.depth == 50, "depth",
          "must be 18, 34 or 50 (torchvision's resnet18/34/50)", std::to_string(o.depth));
  require(o.num_classes > 0, "num_classes", "must be positive", std::to_string(o.num_classes));
  require(o.in_channels > 0, "in_channels", "must be positive", std::to_string(o.in_channels));
  return o;
}

/// The component: a ResNet reading its image from the batch field `input`. The host trains the
/// ResNet's own parameters and buffers (state_root), under torchvision's names.
class ResNetModel {
 public:
  explicit ResNetModel(const tp::cpp::ConfigReader& cfg)
      : options_(read_options(cfg)), net_(std::make_shared<ResNet>(options_)), input_(cfg.get_string("input")) {}

  tp::cpp::Outputs forward(const tp::cpp::Inputs& inputs) {
    const at::Tensor& x = inputs.get(input_);
    if (x.dim() != 4 || x.size(1) != options_.in_channels || !x.is_floating_point())
      throw Failure(TP_ERR_INVALID_ARGUMENT,
                    std::string(kId) + ": input '" + input_ + "': expected a floating [B, " +
                        std::to_string(options_.in_channels) + ", H, W] image (in_channels = " +
                        std::to_string(options_.in_channels) + "), got " + std::string(c10::toString(x.scalar_type())) +
                        " " + c10::str(x.sizes()));
    return {{"logits", net_->forward(x.scalar_type() == dtype_ ? x : x.to(dtype_))}};
  }

  ResNet& state_root() { return *net_; }
  void train(bool on) { net_->train(on); }
  void set_dtype(at::ScalarType dtype) { dtype_ = dtype; }
  void set_activation_checkpointing(bool enabled) { net_->set_activation_checkpointing(enabled); }
  std::vector<tp::cpp::LayerDepth> layer_depths() const { return net_->layer_depths(); }

 private:
  ResNetOptions options_;
  std::shared_ptr<ResNet> net_;
  std::string input_;
  at::ScalarType dtype_ = at::kFloat;
};

const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "depth", TP_CFG_INT, "18", "18, 34 (BasicBlock) or 50 (Bottleneck v1.5)"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "1000", "number of logits (fc outputs)"},
    {sizeof(tp_config_key_t), "in_channels", TP_CFG_INT, "3", "image channels (conv1 input)"},
    {sizeof(tp_config_key_t), "zero_init_residual", TP_CFG_BOOL, "false",
     "zero the last BatchNorm weight of every residual block (each block starts as the identity)"},
    {sizeof(tp_config_key_t), "input", TP_CFG_STRING, "\"image\"", "batch field holding the [C, H, W] image"},
};

// Static, so they describe the defaults (in_channels 3, num_classes 1000); `host plugins check`
// and profiling use them with the default config.
const tp_example_input_t kExamples[] = {
    {sizeof(tp_example_input_t), "image", TP_DTYPE_FLOAT32, 3, {3, 224, 224}, 0},
    {sizeof(tp_example_input_t), "label", TP_DTYPE_INT64, 0, {}, 1000},
};

const tp_descriptor_t kDescriptor = tp::cpp::model_descriptor(
    kId, "1.0.0",
    "torchvision ResNet-18/34/50 (same state names, loads torchvision weights); outputs logits; "
    "stem and every residual block checkpointable",
    kKeys, kExamples);

}  // namespace
}  // namespace tp::resnet

TP_DEFINE_MODEL_PLUGIN("resnet", tp::resnet::ResNetModel, tp::resnet::kDescriptor)
