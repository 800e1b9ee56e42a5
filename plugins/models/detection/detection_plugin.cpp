// detection: the components org.torchhost.fcos (model) and org.torchhost.fcos_loss (loss), their
// config schemas and validation, descriptors and tp_entry. The C shells are
// tp/cpp/model_adapter.h and tp/cpp/loss_adapter.h.
#include <memory>
#include <string>

#include "fcos_loss.h"
#include "fcos_model.h"
#include "fcos_net.h"
#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/image_classifier.h"
#include "tp/cpp/loss_adapter.h"
#include "tp/cpp/model_adapter.h"
#include "tp/iface/loss.h"
#include "tp/iface/model.h"

namespace tp::detection {
namespace {

constexpr const char* kFcosId = "org.torchhost.fcos";
constexpr const char* kFcosLossId = "org.torchhost.fcos_loss";

/// "resnet50" -> 50, "resnet18" -> 18, "resnet34" -> 34; 0 for any other name.
int64_t backbone_depth(const std::string& name) {
  if (name == "resnet50") return 50;
  if (name == "resnet34") return 34;
  if (name == "resnet18") return 18;
  return 0;
}

std::shared_ptr<FcosModel> make_fcos(const tp::cpp::ConfigReader& cfg) {
  FcosOptions o;
  const std::string backbone = cfg.get_string("backbone");
  o.depth = backbone_depth(backbone);
  tp::cpp::require_config(o.depth != 0, kFcosId, "backbone", "must be resnet50, resnet34 or resnet18",
                          "\"" + backbone + "\"");
  const tp::cpp::ImageClassifierConfig common = tp::cpp::read_image_classifier_config(cfg, kFcosId);
  o.num_classes = common.num_classes;
  o.in_channels = common.in_channels;
  o.fpn_channels = cfg.get_int("fpn_channels");
  tp::cpp::require_config(o.fpn_channels > 0 && o.fpn_channels % 32 == 0, kFcosId, "fpn_channels",
                          "must be a positive multiple of 32 (the head's GroupNorm has 32 groups)",
                          std::to_string(o.fpn_channels));
  o.head_convs = cfg.get_int_in("head_convs", 0, 16);

  FcosModelConfig c;
  c.in_channels = common.in_channels;
  c.input = common.input;
  c.orig_size = cfg.get_string("orig_size");
  c.postprocess.score_thresh = cfg.get_float_in("score_thresh", 0.0, 1.0);
  c.postprocess.nms_thresh = cfg.get_float_in("nms_thresh", 0.0, 1.0);
  c.postprocess.detections_per_img = cfg.get_int_in("detections_per_img", 1, 1 << 20);
  c.postprocess.topk_candidates = cfg.get_int_in("topk_candidates", 1, 1 << 24);
  return std::make_shared<FcosModel>(kFcosId, std::make_shared<FcosNet>(o), std::move(c));
}

std::shared_ptr<FcosLoss> make_fcos_loss(const tp::cpp::ConfigReader& cfg) {
  FcosLossConfig c;
  c.boxes = cfg.get_string("boxes");
  c.labels = cfg.get_string("labels");
  const double radius = cfg.get_float("center_sampling_radius");
  tp::cpp::require_config(radius > 0.0, kFcosLossId, "center_sampling_radius", "must be positive",
                          std::to_string(radius));
  c.center_sampling_radius = radius;
  return std::make_shared<FcosLoss>(kFcosLossId, std::move(c));
}

const tp_config_key_t kFcosKeys[] = {
    tp::cpp::config_key("backbone", TP_CFG_STRING, "\"resnet50\"",
                        "resnet50 (torchvision's fcos_resnet50_fpn), resnet34 or resnet18 (_resnet_fpn_extractor, smaller)"),
    tp::cpp::config_key("num_classes", TP_CFG_INT, "91", "logits per location; labels index them (no background class)"),
    tp::cpp::config_key("in_channels", TP_CFG_INT, "3", "image channels (the backbone's first conv input)"),
    tp::cpp::config_key("fpn_channels", TP_CFG_INT, "256", "width of the pyramid and the head, a multiple of 32"),
    tp::cpp::config_key("head_convs", TP_CFG_INT, "4", "3x3 conv - GroupNorm - ReLU blocks per head branch (FCOSHead num_convs)"),
    tp::cpp::config_key("score_thresh", TP_CFG_FLOAT, "0.2", "eval: a detection needs sqrt(class prob x centre-ness) > this"),
    tp::cpp::config_key("nms_thresh", TP_CFG_FLOAT, "0.6", "eval: NMS suppresses a same-class box with IoU > this"),
    tp::cpp::config_key("detections_per_img", TP_CFG_INT, "100", "eval: detections kept per image after NMS"),
    tp::cpp::config_key("topk_candidates", TP_CFG_INT, "1000", "eval: candidates kept per pyramid level before NMS"),
    tp::cpp::kImageInputKey,
    tp::cpp::config_key("orig_size", TP_CFG_STRING, "\"orig_size\"",
                        "optional batch field [2]: the image's (height, width) before resizing; eval boxes are scaled to it"),
};

// The default config's input at ImageNet's 224 x 224 (torchvision trains FCOS at 800 - 1333).
constexpr tp_example_input_t kFcosExamples[] = {
    {sizeof(tp_example_input_t), "image", TP_DTYPE_FLOAT32, 3, {3, 224, 224}, 0},
};

const tp_config_key_t kFcosLossKeys[] = {
    tp::cpp::config_key("boxes", TP_CFG_STRING, "\"boxes\"", "ragged target field of the boxes [N, 4] (x1, y1, x2, y2) in pixels"),
    tp::cpp::config_key("labels", TP_CFG_STRING, "\"labels\"", "ragged target field of the class indices [N]"),
    tp::cpp::config_key("center_sampling_radius", TP_CFG_FLOAT, "1.5",
                        "a location is positive within this many anchor sizes of a box's centre (and inside the box)"),
};

const tp_descriptor_t kFcosDescriptor = tp::cpp::model_descriptor(
    kFcosId, "1.0.0",
    "torchvision FCOS with a ResNet-50 (or 18, 34) FPN (same state names, loads torchvision weights); outputs "
    "the head's cls_logits, bbox_regression, bbox_ctrness and the anchors; in eval mode also the detections "
    "(ragged boxes, scores, labels); ResNet blocks checkpointable",
    kFcosKeys, kFcosExamples);

const tp_descriptor_t kFcosLossDescriptor = tp::cpp::loss_descriptor(
    kFcosLossId, "1.0.0",
    "torchvision FCOS loss: sigmoid focal + GIoU + centre-ness BCE sums over ragged boxes / labels; count = "
    "foreground locations (at least 1); terms classification, bbox_regression, bbox_ctrness",
    kFcosLossKeys);

const tp::cpp::Component kComponents[] = {
    tp::cpp::model_component<FcosModel, kFcosDescriptor, &make_fcos>(),
    tp::cpp::loss_component<FcosLoss, kFcosLossDescriptor, &make_fcos_loss>(),
};

}  // namespace
}  // namespace tp::detection

TP_DEFINE_PLUGIN("detection", TP_TORCH_BUILD_INFO_INIT, tp::detection::kComponents)
