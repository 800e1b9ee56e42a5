// segmentation: the component org.torchhost.segmentation, its config schema and validation, its
// descriptor and tp_entry. The C shell (state lent to the host, to_device, freeze_bn_stats,
// output ownership) is tp/cpp/model_adapter.h, shared with the other model plugins.
#include <memory>
#include <string>

#include "segmentation_model.h"
#include "segmentation_net.h"
#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/image_classifier.h"
#include "tp/cpp/model_adapter.h"
#include "tp/iface/model.h"

namespace tp::segmentation {
namespace {

constexpr const char* kId = "org.torchhost.segmentation";

std::shared_ptr<SegmentationModel> make_segmentation(const tp::cpp::ConfigReader& cfg) {
  SegmentationOptions o;
  const std::string arch = cfg.get_string("arch");
  tp::cpp::require_config(parse_arch(arch, o.arch), kId, "arch",
                          "must be fcn_resnet50, deeplabv3_resnet50, deeplabv3_mobilenet_v3_large or "
                          "lraspp_mobilenet_v3_large",
                          "\"" + arch + "\"");
  const tp::cpp::ImageClassifierConfig common = tp::cpp::read_image_classifier_config(cfg, kId);
  o.num_classes = common.num_classes;
  o.in_channels = common.in_channels;
  o.aux_loss = cfg.get_bool("aux_loss");
  tp::cpp::require_config(!o.aux_loss || o.arch != Arch::kLRASPPMobileNetV3Large, kId, "aux_loss",
                          "must be false for lraspp_mobilenet_v3_large (LRASPP has no auxiliary head)", "true");
  return std::make_shared<SegmentationModel>(kId, std::make_shared<SegmentationNet>(o), common);
}

const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "arch", TP_CFG_STRING, "\"lraspp_mobilenet_v3_large\"",
     "fcn_resnet50, deeplabv3_resnet50, deeplabv3_mobilenet_v3_large or lraspp_mobilenet_v3_large (torchvision's)"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "21", "classes per pixel (channels of out and aux)"},
    {sizeof(tp_config_key_t), "in_channels", TP_CFG_INT, "3", "image channels (the backbone's first conv input)"},
    {sizeof(tp_config_key_t), "aux_loss", TP_CFG_BOOL, "false",
     "add torchvision's auxiliary FCN head (output aux) on the stride-8 features; not for lraspp"},
    tp::cpp::kImageInputKey,
};

// The default config's input at ImageNet's 224 x 224 (torchvision's weights were trained at 520).
constexpr tp_example_input_t kExamples[] = {
    {sizeof(tp_example_input_t), "image", TP_DTYPE_FLOAT32, 3, {3, 224, 224}, 0},
};

const tp_descriptor_t kDescriptor = tp::cpp::model_descriptor(
    kId, "1.0.0",
    "torchvision FCN / DeepLabV3 (ResNet-50, MobileNetV3-Large) and LR-ASPP (MobileNetV3-Large) semantic "
    "segmentation (same state names, loads torchvision weights); outputs out (and aux) [B, classes, H, W]; "
    "backbone blocks checkpointable",
    kKeys, kExamples);

const tp::cpp::Component kComponents[] = {
    tp::cpp::model_component<SegmentationModel, kDescriptor, &make_segmentation>()};

}  // namespace
}  // namespace tp::segmentation

TP_DEFINE_PLUGIN("segmentation", TP_TORCH_BUILD_INFO_INIT, tp::segmentation::kComponents)
