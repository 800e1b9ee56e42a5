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

void read_common(const ConfigReader& cfg, const char* id, int64_t& num_classes, int64_t& in_channels) {
  num_classes = cfg.get_int("num_classes");
  in_channels = cfg.get_int("in_channels");
  require_config(num_classes > 0, id, "num_classes", "must be positive", std::to_string(num_classes));
  require_config(in_channels > 0, id, "in_channels", "must be positive", std::to_string(in_channels));
}

using EfficientNetModel = tp::cpp::ImageClassifier<EfficientNet>;
using MobileNetV3Model = tp::cpp::ImageClassifier<MobileNetV3>;

std::shared_ptr<EfficientNetModel> make_efficientnet(const ConfigReader& cfg) {
  EfficientNetOptions o;
  o.variant = cfg.get_string("variant");
  const EfficientNetVariant* variant = find_efficientnet_variant(o.variant);
  require_config(variant != nullptr, kEfficientNetId, "variant", "must be one of b0 .. b7", "\"" + o.variant + "\"");
  read_common(cfg, kEfficientNetId, o.num_classes, o.in_channels);
  o.dropout = cfg.get_float("dropout") == kVariantDropout ? variant->dropout
                                                          : read_probability(cfg, kEfficientNetId, "dropout");
  o.stochastic_depth_prob = read_probability(cfg, kEfficientNetId, "stochastic_depth_prob");
  return std::make_shared<EfficientNetModel>(kEfficientNetId, std::make_shared<EfficientNet>(o), o.in_channels,
                                             cfg.get_string("input"));
}

std::shared_ptr<MobileNetV3Model> make_mobilenet_v3(const ConfigReader& cfg) {
  MobileNetV3Options o;
  o.variant = cfg.get_string("variant");
  require_config(o.variant == "small" || o.variant == "large", kMobileNetV3Id, "variant", "must be \"small\" or \"large\"",
          "\"" + o.variant + "\"");
  read_common(cfg, kMobileNetV3Id, o.num_classes, o.in_channels);
  o.dropout = read_probability(cfg, kMobileNetV3Id, "dropout");
  return std::make_shared<MobileNetV3Model>(kMobileNetV3Id, std::make_shared<MobileNetV3>(o), o.in_channels,
                                            cfg.get_string("input"));
}

const tp_config_key_t kEfficientNetKeys[] = {
    {sizeof(tp_config_key_t), "variant", TP_CFG_STRING, "\"b0\"", "\"b0\" .. \"b7\" (torchvision's efficientnet_b0..b7)"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "1000", "number of logits (classifier outputs)"},
    {sizeof(tp_config_key_t), "in_channels", TP_CFG_INT, "3", "image channels (stem conv input)"},
    {sizeof(tp_config_key_t), "input", TP_CFG_STRING, "\"image\"", "batch field holding the [C, H, W] image"},
    {sizeof(tp_config_key_t), "dropout", TP_CFG_FLOAT, "-1.0",
     "classifier dropout in [0, 1); -1: the variant's (b0-b1 0.2, b2-b3 0.3, b4-b5 0.4, b6-b7 0.5)"},
    {sizeof(tp_config_key_t), "stochastic_depth_prob", TP_CFG_FLOAT, "0.2",
     "in [0, 1): drop probability of the last MBConv residual branch (row mode), linear from 0 over the blocks"},
};

const tp_config_key_t kMobileNetV3Keys[] = {
    {sizeof(tp_config_key_t), "variant", TP_CFG_STRING, "\"large\"",
     "\"small\" or \"large\" (torchvision's mobilenet_v3_*)"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "1000", "number of logits (classifier outputs)"},
    {sizeof(tp_config_key_t), "in_channels", TP_CFG_INT, "3", "image channels (stem conv input)"},
    {sizeof(tp_config_key_t), "input", TP_CFG_STRING, "\"image\"", "batch field holding the [C, H, W] image"},
    {sizeof(tp_config_key_t), "dropout", TP_CFG_FLOAT, "0.2", "classifier dropout in [0, 1)"},
};

// Static, so they describe the defaults (in_channels 3, num_classes 1000) at ImageNet's 224x224
// (B1..B7 were trained larger, but any size works); `host plugins check` and profiling use them.
const tp_example_input_t kExamples[] = {
    {sizeof(tp_example_input_t), "image", TP_DTYPE_FLOAT32, 3, {3, 224, 224}, 0},
    {sizeof(tp_example_input_t), "label", TP_DTYPE_INT64, 0, {}, 1000},
};

const tp_descriptor_t kEfficientNetDescriptor = tp::cpp::model_descriptor(
    kEfficientNetId, "1.0.0",
    "torchvision EfficientNet-B0..B7 (same state names, loads torchvision weights); outputs logits; "
    "stem, every MBConv block and the last conv checkpointable",
    kEfficientNetKeys, kExamples);

const tp_descriptor_t kMobileNetV3Descriptor = tp::cpp::model_descriptor(
    kMobileNetV3Id, "1.0.0",
    "torchvision MobileNetV3-Small/Large (same state names, loads torchvision weights); outputs logits; "
    "stem, every inverted residual block and the last conv checkpointable",
    kMobileNetV3Keys, kExamples);

const tp::cpp::Component kComponents[] = {
    tp::cpp::model_component<EfficientNetModel, kEfficientNetDescriptor, &make_efficientnet>(),
    tp::cpp::model_component<MobileNetV3Model, kMobileNetV3Descriptor, &make_mobilenet_v3>(),
};

}  // namespace
}  // namespace tp::efficientnet

TP_DEFINE_PLUGIN("efficientnet", TP_TORCH_BUILD_INFO_INIT, tp::efficientnet::kComponents)
