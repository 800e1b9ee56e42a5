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

using tp::cpp::require_config;

ConvNeXtOptions read_options(const tp::cpp::ConfigReader& cfg, const tp::cpp::ImageClassifierConfig& common) {
  ConvNeXtOptions o;
  o.variant = cfg.get_string("variant");
  o.num_classes = common.num_classes;
  o.in_channels = common.in_channels;
  o.layer_scale = cfg.get_float("layer_scale");
  require_config(is_variant(o.variant), kId, "variant",
                 "must be \"tiny\", \"small\" or \"base\" (torchvision's convnext_<variant>)", "\"" + o.variant + "\"");
  require_config(std::isfinite(o.layer_scale) && o.layer_scale > 0.0, kId, "layer_scale", "must be positive",
                 c10::str(o.layer_scale));
  // -1, the schema's default, stands for the variant's own default (one schema serves all three).
  const double p = cfg.get_float("stochastic_depth_prob");
  require_config(p == -1.0 || (p >= 0.0 && p <= 1.0), kId, "stochastic_depth_prob",
                 "must be in [0, 1] (or -1: the variant's torchvision default)", c10::str(p));
  o.stochastic_depth_prob = p == -1.0 ? default_stochastic_depth_prob(o.variant) : p;
  return o;
}

/// The component: a ConvNeXt reading its image from the batch field `input`
/// (tp/cpp/image_classifier.h); H, W >= 32 (the stem and three downsamplings divide by 32).
using ConvNeXtModel = tp::cpp::ImageClassifier<ConvNeXt>;

std::shared_ptr<ConvNeXtModel> make_convnext(const tp::cpp::ConfigReader& cfg) {
  const tp::cpp::ImageClassifierConfig common = tp::cpp::read_image_classifier_config(cfg, kId);
  return std::make_shared<ConvNeXtModel>(kId, std::make_shared<ConvNeXt>(read_options(cfg, common)), common,
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
    tp::cpp::kImageInputKey,
};

const tp_descriptor_t kDescriptor = tp::cpp::model_descriptor(
    kId, "1.0.0",
    "torchvision ConvNeXt tiny/small/base (same state names, loads torchvision weights); outputs logits; "
    "every CNBlock checkpointable",
    kKeys, tp::cpp::kImageNetExamples);

const tp::cpp::Component kComponents[] = {tp::cpp::model_component<ConvNeXtModel, kDescriptor, &make_convnext>()};

}  // namespace
}  // namespace tp::convnext

TP_DEFINE_PLUGIN("convnext", TP_TORCH_BUILD_INFO_INIT, tp::convnext::kComponents)
