// org.torchhost.fcos: the module, following torchvision's FCOS.forward up to the head and the
// anchors (fcos_net.h).
#include "fcos_net.h"

#include "anchors.h"

namespace tp::detection {

FcosNet::FcosNet(const FcosOptions& options) {
  backbone_ = register_module("backbone",
                              std::make_shared<ResNetFpn>(options.depth, options.in_channels, options.fpn_channels));
  head_ = register_module("head", std::make_shared<FcosHead>(options.fpn_channels, options.num_classes,
                                                             options.head_convs));
}

FcosForward FcosNet::forward(const at::Tensor& images) {
  const std::vector<at::Tensor> features = backbone_->forward(images);
  FcosForward out;
  out.head = head_->forward(features);
  out.anchors = fcos_anchors(features, images.size(2), images.size(3));
  for (const at::Tensor& f : features) out.num_anchors_per_level.push_back(f.size(2) * f.size(3));
  return out;
}

void FcosNet::set_activation_checkpointing(bool enabled) {
  Checkpointable::set_activation_checkpointing(enabled);
  backbone_->body().set_activation_checkpointing(enabled);
}

std::vector<tp::cpp::LayerDepth> FcosNet::layer_depths() const {
  std::vector<tp::cpp::LayerDepth> depths = backbone_->body().layer_depths();
  for (auto& d : depths) d.prefix = "backbone.body." + d.prefix;
  return depths;
}

}  // namespace tp::detection
