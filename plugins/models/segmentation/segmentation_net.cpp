// org.torchhost.segmentation: the module, following torchvision/models/segmentation
// (_SimpleSegmentationModel, FCN, DeepLabV3, LRASPP and their builders).
#include "segmentation_net.h"

#include <utility>

namespace tp::segmentation {
namespace {

struct ArchName {
  const char* name;
  Arch arch;
};
constexpr ArchName kArchs[] = {
    {"fcn_resnet50", Arch::kFcnResNet50},
    {"deeplabv3_resnet50", Arch::kDeepLabV3ResNet50},
    {"deeplabv3_mobilenet_v3_large", Arch::kDeepLabV3MobileNetV3Large},
    {"lraspp_mobilenet_v3_large", Arch::kLRASPPMobileNetV3Large},
};

bool uses_resnet(Arch arch) { return arch == Arch::kFcnResNet50 || arch == Arch::kDeepLabV3ResNet50; }

}  // namespace

bool parse_arch(const std::string& name, Arch& out) {
  for (const ArchName& a : kArchs)
    if (name == a.name) {
      out = a.arch;
      return true;
    }
  return false;
}

SegmentationNet::SegmentationNet(const SegmentationOptions& options) {
  TORCH_CHECK(!options.aux_loss || options.arch != Arch::kLRASPPMobileNetV3Large, "LRASPP has no auxiliary head");
  int64_t low_channels = 0, high_channels = 0;
  if (uses_resnet(options.arch)) {
    // resnet50(replace_stride_with_dilation=[False, True, True]): output stride 8; the
    // IntermediateLayerGetter keeps conv1 .. layer4 and drops avgpool and fc.
    resnet::ResNetOptions o;
    o.depth = 50;
    o.in_channels = options.in_channels;
    o.replace_stride_with_dilation = {false, true, true};
    o.fc = false;
    resnet_ = register_module("backbone", std::make_shared<resnet::ResNet>(o));
    low_channels = 1024;
    high_channels = 2048;
  } else {
    // mobilenet_v3_large(dilated=True).features: output stride 16. torchvision's taps are
    // stage_indices[-4] (C2, stride 8) and stage_indices[-1] (the last conv).
    efficientnet::MobileNetV3Options o;
    o.variant = "large";
    o.in_channels = options.in_channels;
    o.dilated = true;
    mobilenet_ = register_module("backbone", std::make_shared<efficientnet::MobileNetV3Features>(o));
    efficientnet::init_convs_and_norms(*mobilenet_);
    const std::vector<size_t> stages = mobilenet_->stage_indices();
    low_index_ = stages[stages.size() - 4];
    high_index_ = stages.back();
    low_channels = mobilenet_->channels(low_index_);
    high_channels = mobilenet_->channels(high_index_);
  }
  switch (options.arch) {
    case Arch::kFcnResNet50: classifier_ = register_module("classifier", fcn_head(high_channels, options.num_classes)); break;
    case Arch::kDeepLabV3ResNet50:
    case Arch::kDeepLabV3MobileNetV3Large:
      classifier_ = register_module("classifier", deeplab_head(high_channels, options.num_classes));
      break;
    case Arch::kLRASPPMobileNetV3Large:
      lraspp_ = register_module("classifier",
                                std::make_shared<LRASPPHead>(low_channels, high_channels, options.num_classes, 128));
      break;
  }
  if (options.aux_loss) aux_classifier_ = register_module("aux_classifier", fcn_head(low_channels, options.num_classes));
}

std::pair<at::Tensor, at::Tensor> SegmentationNet::backbone_maps(const at::Tensor& x) {
  if (resnet_) {
    std::vector<at::Tensor> stages = resnet_->stages(x);
    return {std::move(stages[2]), std::move(stages[3])};
  }
  std::vector<at::Tensor> maps = mobilenet_->feature_maps(x, {low_index_, high_index_});
  return {std::move(maps[0]), std::move(maps[1])};
}

SegmentationOutputs SegmentationNet::forward(const at::Tensor& x) {
  const at::IntArrayRef size = x.sizes().slice(2);
  const auto [low, high] = backbone_maps(x);
  // torchvision's order: the classifier, then the auxiliary head (their dropout draws follow it).
  SegmentationOutputs result;
  result.out = upsample(lraspp_ ? lraspp_->forward(low, high) : classifier_->forward(high), size);
  if (aux_classifier_) result.aux = upsample(aux_classifier_->forward(low), size);
  return result;
}

void SegmentationNet::set_activation_checkpointing(bool enabled) {
  Checkpointable::set_activation_checkpointing(enabled);
  if (resnet_) resnet_->set_activation_checkpointing(enabled);
  else mobilenet_->set_activation_checkpointing(enabled);
}

std::vector<tp::cpp::LayerDepth> SegmentationNet::layer_depths() const {
  if (mobilenet_) return mobilenet_->layer_depths("backbone.");
  std::vector<tp::cpp::LayerDepth> depths = resnet_->layer_depths();
  for (auto& d : depths) d.prefix = "backbone." + d.prefix;
  return depths;
}

}  // namespace tp::segmentation
