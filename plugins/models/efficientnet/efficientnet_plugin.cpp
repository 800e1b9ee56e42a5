// efficientnet: the two components (org.torchhost.efficientnet, org.torchhost.mobilenet_v3), their
// config schemas and validation, descriptors and tp_entry.
#include <c10/util/StringUtil.h>

#include <memory>
#include <string>

#include "efficientnet_net.h"
#include "mobilenet_v3_net.h"
#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/image_classifier.h"
#include "tp/cpp/model_adapter.h"
#include "tp/iface/model.h"

namespace tp::efficientnet {
namespace {

using tp::cpp::ConfigReader;
using tp::cpp::Failure;

constexpr const char* kEfficientNetId = "org.torchhost.efficientnet";
constexpr const char* kMobileNetV3Id = "org.torchhost.mobilenet_v3";

/// The `dropout` value that stands for "the variant's torchvision default" (the schema has one
/// static default, the variants several).
constexpr double kVariantDropout = -1.0;

using tp::cpp::require_config;

/// A probability that must lie in [0, 1): 1 would drop everything (and torchvision's stochastic
/// depth would then skip its rescale), so it is refused.
double read_probability(const ConfigReader& cfg, const char* id, const char* key) {
  const double p = cfg.get_float(key);
  require_config(p >= 0.0 && p < 1.0, id, key, "must be in [0, 1)", c10::str(p));
  return p;
}

using EfficientNetModel = tp::cpp::ImageClassifier<EfficientNet>;
using MobileNetV3Model = tp::cpp::ImageClassifier<MobileNetV3>;

std::shared_ptr<EfficientNetModel> make_efficientnet(const ConfigReader& cfg) {
  EfficientNetOptions o;
  o.variant = cfg.get_string("variant");
  const EfficientNetVariant* variant = find_efficientnet_variant(o.variant);
  require_config(variant != nullptr, kEfficientNetId, "variant", "must be one of b0 .. b7", "\"" + o.variant + "\"");
  const tp::cpp::ImageClassifierConfig common = tp::cpp::read_image_classifier_config(cfg, kEfficientNetId);
  o.num_classes = common.num_classes;
  o.in_channels = common.in_channels;
  o.dropout = cfg.get_float("dropout") == kVariantDropout ? variant->dropout
                                                          : read_probability(cfg, kEfficientNetId, "dropout");
  o.stochastic_depth_prob = read_probability(cfg, kEfficientNetId, "stochastic_depth_prob");
  o.fused_norm = cfg.get_bool("fused_norm");
  return std::make_shared<EfficientNetModel>(kEfficientNetId, std::make_shared<EfficientNet>(o), common);
}

std::shared_ptr<MobileNetV3Model> make_mobilenet_v3(const ConfigReader& cfg) {
  MobileNetV3Options o;
  o.variant = cfg.get_string("variant");
  require_config(o.variant == "small" || o.variant == "large", kMobileNetV3Id, "variant", "must be \"small\" or \"large\"",
          "\"" + o.variant + "\"");
  const tp::cpp::ImageClassifierConfig common = tp::cpp::read_image_classifier_config(cfg, kMobileNetV3Id);
  o.num_classes = common.num_classes;
  o.in_channels = common.in_channels;
  o.dropout = read_probability(cfg, kMobileNetV3Id, "dropout");
  o.fused_norm = cfg.get_bool("fused_norm");
  return std::make_shared<MobileNetV3Model>(kMobileNetV3Id, std::make_shared<MobileNetV3>(o), common);
}

// Off by default until a GPU run measures it on these families (docs/model_zoo.md); ResNet's is on.
constexpr tp_config_key_t kFusedNormKey = {
    sizeof(tp_config_key_t), "fused_norm", TP_CFG_BOOL, "false",
    "true: every BatchNorm with its SiLU, Hardswish or ReLU in the host's fused CUDA ops when training on "
    "channels-last CUDA input (tp/cpp/fused_norm.h); false: the unfused ops everywhere"};

const tp_config_key_t kEfficientNetKeys[] = {
    {sizeof(tp_config_key_t), "variant", TP_CFG_STRING, "\"b0\"", "\"b0\" .. \"b7\" (torchvision's efficientnet_b0..b7)"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "1000", "number of logits (classifier outputs)"},
    {sizeof(tp_config_key_t), "in_channels", TP_CFG_INT, "3", "image channels (stem conv input)"},
    tp::cpp::kImageInputKey,
    {sizeof(tp_config_key_t), "dropout", TP_CFG_FLOAT, "-1.0",
     "classifier dropout in [0, 1); -1: the variant's (b0-b1 0.2, b2-b3 0.3, b4-b5 0.4, b6-b7 0.5)"},
    {sizeof(tp_config_key_t), "stochastic_depth_prob", TP_CFG_FLOAT, "0.2",
     "in [0, 1): drop probability of the last MBConv residual branch (row mode), linear from 0 over the blocks"},
    kFusedNormKey,
};

const tp_config_key_t kMobileNetV3Keys[] = {
    {sizeof(tp_config_key_t), "variant", TP_CFG_STRING, "\"large\"",
     "\"small\" or \"large\" (torchvision's mobilenet_v3_*)"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "1000", "number of logits (classifier outputs)"},
    {sizeof(tp_config_key_t), "in_channels", TP_CFG_INT, "3", "image channels (stem conv input)"},
    tp::cpp::kImageInputKey,
    {sizeof(tp_config_key_t), "dropout", TP_CFG_FLOAT, "0.2", "classifier dropout in [0, 1)"},
    kFusedNormKey,
};

// The examples are tp::cpp::kImageNetExamples, at ImageNet's 224x224 (B1..B7 were trained larger,
// but any size works).
const tp_descriptor_t kEfficientNetDescriptor = tp::cpp::model_descriptor(
    kEfficientNetId, "1.0.0",
    "torchvision EfficientNet-B0..B7 (same state names, loads torchvision weights); outputs logits; "
    "stem, every MBConv block and the last conv checkpointable",
    kEfficientNetKeys, tp::cpp::kImageNetExamples);

const tp_descriptor_t kMobileNetV3Descriptor = tp::cpp::model_descriptor(
    kMobileNetV3Id, "1.0.0",
    "torchvision MobileNetV3-Small/Large (same state names, loads torchvision weights); outputs logits; "
    "stem, every inverted residual block and the last conv checkpointable",
    kMobileNetV3Keys, tp::cpp::kImageNetExamples);

const tp::cpp::Component kComponents[] = {
    tp::cpp::model_component<EfficientNetModel, kEfficientNetDescriptor, &make_efficientnet>(),
    tp::cpp::model_component<MobileNetV3Model, kMobileNetV3Descriptor, &make_mobilenet_v3>(),
};

}  // namespace
}  // namespace tp::efficientnet

TP_DEFINE_PLUGIN("efficientnet", TP_TORCH_BUILD_INFO_INIT, tp::efficientnet::kComponents)
