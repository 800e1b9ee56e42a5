// resnet: the component class of org.torchhost.resnet, its descriptor and tp_entry. The C shell
// (state lent to the host, to_device keeping num_batches_tracked int64, output ownership) is
// tp/cpp/model_adapter.h, shared with the other model plugins.
#include <c10/util/StringUtil.h>

#include <memory>
#include <string>

#include "resnet_net.h"
#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/image_classifier.h"
#include "tp/cpp/model_adapter.h"
#include "tp/iface/model.h"

namespace tp::resnet {
namespace {

constexpr const char* kId = "org.torchhost.resnet";

/// The component: a ResNet reading its image from the batch field `input` (tp/cpp/image_classifier.h).
/// The host trains the ResNet's own parameters and buffers, under torchvision's names.
using ResNetModel = tp::cpp::ImageClassifier<ResNet>;

std::shared_ptr<ResNetModel> make_resnet(const tp::cpp::ConfigReader& cfg) {
  ResNetOptions o;
  o.depth = cfg.get_int("depth");
  tp::cpp::require_config(o.depth == 18 || o.depth == 34 || o.depth == 50, kId, "depth",
                          "must be 18, 34 or 50 (torchvision's resnet18/34/50)", std::to_string(o.depth));
  const tp::cpp::ImageClassifierConfig common = tp::cpp::read_image_classifier_config(cfg, kId);
  o.num_classes = common.num_classes;
  o.in_channels = common.in_channels;
  o.zero_init_residual = cfg.get_bool("zero_init_residual");
  o.fused_norm = cfg.get_bool("fused_norm");
  o.drop_path_rate = cfg.get_float("drop_path_rate");
  // 1 would drop the last block's branch for every sample, and timm's keep-scaling divides by 0.
  tp::cpp::require_config(o.drop_path_rate >= 0.0 && o.drop_path_rate < 1.0, kId, "drop_path_rate",
                          "must be in [0, 1) (timm's stochastic depth rate of the last block)",
                          c10::str(o.drop_path_rate));
  return std::make_shared<ResNetModel>(kId, std::make_shared<ResNet>(o), common);
}

const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "depth", TP_CFG_INT, "18", "18, 34 (BasicBlock) or 50 (Bottleneck v1.5)"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "1000", "number of logits (fc outputs)"},
    {sizeof(tp_config_key_t), "in_channels", TP_CFG_INT, "3", "image channels (conv1 input)"},
    {sizeof(tp_config_key_t), "zero_init_residual", TP_CFG_BOOL, "false",
     "zero the last BatchNorm weight of every residual block (each block starts as the identity)"},
    {sizeof(tp_config_key_t), "fused_norm", TP_CFG_BOOL, "true",
     "BatchNorm + ReLU (+ residual add), and the downsample's BatchNorm, in the host's fused CUDA ops when "
     "training on channels-last CUDA input (tp/cpp/fused_norm.h); false: the unfused ops everywhere"},
    {sizeof(tp_config_key_t), "drop_path_rate", TP_CFG_FLOAT, "0.0",
     "timm's stochastic depth: in training block i of n drops its residual branch per sample with probability "
     "drop_path_rate * i / (n - 1); in [0, 1), 0 = off"},
    tp::cpp::kImageInputKey,
};

const tp_descriptor_t kDescriptor = tp::cpp::model_descriptor(
    kId, "1.0.0",
    "torchvision ResNet-18/34/50 (same state names, loads torchvision weights); outputs logits; "
    "stem and every residual block checkpointable; timm's stochastic depth (drop_path_rate)",
    kKeys, tp::cpp::kImageNetExamples);

const tp::cpp::Component kComponents[] = {tp::cpp::model_component<ResNetModel, kDescriptor, &make_resnet>()};

}  // namespace
}  // namespace tp::resnet

TP_DEFINE_PLUGIN("resnet", TP_TORCH_BUILD_INFO_INIT, tp::resnet::kComponents)
