// convnext: the component class of org.torchhost.convnext, its descriptor and tp_entry. The C
// shell (state lent to the host, to_device, output ownership) is tp/cpp/model_adapter.h, shared
// with the other model plugins.
#include <c10/util/StringUtil.h>

#include <cmath>
#include <memory>
#include <string>

#include "convnext_net.h"
#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/image_classifier.h"
#include "tp/cpp/model_adapter.h"
#include "tp/iface/model.h"

namespace tp::convnext {
namespace {

constexpr const char* kId = "org.torchhost.convnext";

/// tp::cpp::require_config for this component.
void require(bool ok, const char* key, const std::string& what, const std::string& got) {
  tp::cpp::require_config(ok, kId, key, what, got);
}

ConvNeXtOptions read_options(const tp::cpp::ConfigReader& cfg) {
  ConvNeXtOptions o;
  o.variant = cfg.get_string("variant");
  o.num_classes = cfg.get_int("num_classes");
  o.in_channels = cfg.get_int("in_channels");
  o.layer_scale = cfg.get_float("layer_scale");
  require(is_variant(o.variant), "variant", "must be \"tiny\", \"small\" or \"base\" (torchvision's convnext_<variant>)",
          "\"" + o.variant + "\"");
  require(o.num_classes > 0, "num_classes", "must be positive", std::to_string(o.num_classes));
  require(o.in_channels > 0, "in_channels", "must be positive", std::to_string(o.in_channels));
  require(std::isfinite(o.layer_scale) && o.layer_scale > 0.0, "layer_scale", "must be positive",
          c10::str(o.layer_scale));
  // -1, the schema's default, stands for the variant's own default (one schema serves all three).
  const double p = cfg.get_float("stochastic_depth_prob");
  require(p == -1.0 || (p >= 0.0 && p <= 1.0), "stochastic_depth_prob",
          "must be in [0, 1] (or -1: the variant's torchvision default)", c10::str(p));
  o.stochastic_depth_prob = p == -1.0 ? default_stochastic_depth_prob(o.variant) : p;
  return o;
}

/// The component: a ConvNeXt reading its image from the batch field `input`
/// (tp/cpp/image_classifier.h); H, W >= 32 (the stem and three downsamplings divide by 32).
using ConvNeXtModel = tp::cpp::ImageClassifier<ConvNeXt>;

std::shared_ptr<ConvNeXtModel> make_convnext(const tp::cpp::ConfigReader& cfg) {
  const ConvNeXtOptions o = read_options(cfg);
  return std::make_shared<ConvNeXtModel>(kId, std::make_shared<ConvNeXt>(o), o.in_channels, cfg.get_string("input"),
                                         tp::cpp::ImageSizeRule{32, 0});
}

const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "variant", TP_CFG_STRING, "\"tiny\"",
     "\"tiny\", \"small\" or \"base\" (torchvision's convnext_tiny/small/base)"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "1000", "number of logits (classifier.2 outputs)"},
    {sizeof(tp_config_key_t), "in_channels", TP_CFG_INT, "3", "image channels (stem input)"},
    {sizeof(tp_config_key_t), "stochastic_depth_prob", TP_CFG_FLOAT, "-1.0",
     "drop rate of the last block, the others linear from 0; -1: the variant's (tiny 0.1, small 0.4, base 0.5)"},
    {sizeof(tp_config_key_t), "layer_scale", TP_CFG_FLOAT, "1e-6", "initial value of every block's layer_scale"},
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
    "torchvision ConvNeXt tiny/small/base (same state names, loads torchvision weights); outputs logits; "
    "every CNBlock checkpointable",
    kKeys, kExamples);

const tp::cpp::Component kComponents[] = {tp::cpp::model_component<ConvNeXtModel, kDescriptor, &make_convnext>()};

}  // namespace
}  // namespace tp::convnext

TP_DEFINE_PLUGIN("convnext", TP_TORCH_BUILD_INFO_INIT, tp::convnext::kComponents)
