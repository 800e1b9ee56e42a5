// vit: the component class of org.torchhost.vit, its descriptor and tp_entry. The C shell (state
// lent to the host, to_device, output ownership) is tp/cpp/model_adapter.h, shared with the other
// model plugins.
#include <c10/util/StringUtil.h>

#include <memory>
#include <string>

#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/image_classifier.h"
#include "tp/cpp/model_adapter.h"
#include "tp/iface/model.h"
#include "vit_net.h"

namespace tp::vit {
namespace {

constexpr const char* kId = "org.torchhost.vit";

using tp::cpp::require_config;

/// A rate in [0, 1].
double probability(const tp::cpp::ConfigReader& cfg, const char* key) {
  const double p = cfg.get_float(key);
  require_config(p >= 0.0 && p <= 1.0, kId, key, "must be in [0, 1]", c10::str(p));
  return p;
}

ViTOptions read_options(const tp::cpp::ConfigReader& cfg, const tp::cpp::ImageClassifierConfig& common) {
  ViTOptions o;
  o.variant = cfg.get_string("variant");
  o.image_size = cfg.get_int("image_size");
  o.num_classes = common.num_classes;
  o.in_channels = common.in_channels;
  require_config(is_variant(o.variant), kId, "variant",
                 "must be \"b_16\", \"b_32\" or \"l_16\" (torchvision's vit_<variant>)", "\"" + o.variant + "\"");
  const int64_t patch = variant_setting(o.variant).patch_size;
  require_config(o.image_size > 0 && o.image_size % patch == 0, kId, "image_size",
                 "must be a positive multiple of the patch size " + std::to_string(patch) + " (variant \"" +
                     o.variant + "\")",
                 std::to_string(o.image_size));
  o.dropout = probability(cfg, "dropout");
  o.attention_dropout = probability(cfg, "attention_dropout");
  o.drop_path = probability(cfg, "drop_path");
  return o;
}

/// The component: a ViT reading its image from the batch field `input` (tp/cpp/image_classifier.h),
/// exactly image_size square, as torchvision asserts: the position embeddings are sized for it.
using ViTModel = tp::cpp::ImageClassifier<VisionTransformer>;

std::shared_ptr<ViTModel> make_vit(const tp::cpp::ConfigReader& cfg) {
  const tp::cpp::ImageClassifierConfig common = tp::cpp::read_image_classifier_config(cfg, kId);
  const ViTOptions o = read_options(cfg, common);
  return std::make_shared<ViTModel>(kId, std::make_shared<VisionTransformer>(o), common,
                                    tp::cpp::ImageSizeRule{1, o.image_size});
}

const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "variant", TP_CFG_STRING, "\"b_16\"",
     "\"b_16\", \"b_32\" or \"l_16\" (torchvision's vit_b_16/b_32/l_16)"},
    {sizeof(tp_config_key_t), "image_size", TP_CFG_INT, "224",
     "input height and width, a multiple of the patch size; sizes the position embeddings"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "1000", "number of logits (heads.head outputs)"},
    {sizeof(tp_config_key_t), "in_channels", TP_CFG_INT, "3", "image channels (conv_proj input)"},
    {sizeof(tp_config_key_t), "dropout", TP_CFG_FLOAT, "0.0", "dropout after the embedding, the attention and the MLP"},
    {sizeof(tp_config_key_t), "attention_dropout", TP_CFG_FLOAT, "0.0", "dropout of the attention weights"},
    {sizeof(tp_config_key_t), "drop_path", TP_CFG_FLOAT, "0.0",
     "timm's stochastic depth on the residual branches (last layer's rate, linear from 0); not in torchvision"},
    tp::cpp::kImageInputKey,
};

const tp_descriptor_t kDescriptor = tp::cpp::model_descriptor(
    kId, "1.0.0",
    "torchvision ViT-B/16, B/32, L/16 (same state names, loads torchvision weights); outputs logits; "
    "every encoder layer checkpointable",
    kKeys, tp::cpp::kImageNetExamples);  // the default image_size is 224

const tp::cpp::Component kComponents[] = {tp::cpp::model_component<ViTModel, kDescriptor, &make_vit>()};

}  // namespace
}  // namespace tp::vit

TP_DEFINE_PLUGIN("vit", TP_TORCH_BUILD_INFO_INIT, tp::vit::kComponents)
