// optim.layer_decay end to end on the host's side, for layer_decay_oracle.py: resnet.so's
// ResNet-<depth> through ModelProxy (its declared depths, tp.model/1 @since 1.4), then
// make_optimizer with AdamW, lr 0.1, weight_decay 0.05 and the given layer_decay. Prints one line
// per parameter: "<name> <lr> <weight_decay>" (lr as an exact hex float), in optimizer order.
// Usage: layer_decay_driver <plugin dir> <depth> <layer_decay>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include "tp/framework/optim/optimizer_factory.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/model_proxy.h"
#include "tp/framework/plugin/plugin_library.h"
#include "tp/framework/util/log.h"

#include <torch/optim/adamw.h>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: layer_decay_driver <plugin dir> <depth> <layer_decay>\n");
    return 2;
  }
  try {
    tp::Logger logger;
    tp::HostServices services{logger, tp::ProcessPlace{}};
    const auto library = tp::PluginLibrary::load(std::filesystem::path(argv[1]) / "resnet.so", services);
    const toml::table options{{"depth", std::stoll(argv[2])}, {"num_classes", 10}, {"in_channels", 3},
                              {"zero_init_residual", false}, {"fused_norm", true}, {"input", "image"},
                              {"drop_path_rate", 0.0}};
    const tp::ComponentInfo* info = nullptr;
    for (const tp::ComponentInfo& c : library->components())
      if (c.id == "org.torchhost.resnet") info = &c;
    if (info == nullptr) throw std::runtime_error("resnet.so has no org.torchhost.resnet");
    tp::ModelProxy model(tp::ComponentEntry{info, library}, tp::ComponentConfig{info->id, "model", options});
    model.to_device(c10::Device(c10::kCPU));
    tp::OptimSection o;
    o.name = "adamw";
    o.lr = 0.1;
    o.lr_base = 0.0;
    o.lr_base_size = 256;
    o.lr_base_scale = "auto";
    o.weight_decay = 0.05;
    o.momentum = 0.9;
    o.dampening = 0.0;  // read by every optimizer's check (sgd's and lars's alone may set it)
    o.nesterov = false;
    o.betas = {0.9, 0.999};
    o.eps = 1e-8;
    o.amsgrad = false;
    o.alpha = 0.99;
    o.centered = false;
    o.caution = false;  // read by every optimizer's check (Lion's alone may set it)
    o.implementation = "for_loop";
    o.layer_decay = std::stod(argv[3]);
    const tp::LayerDepths depths = model.layer_depths();
    const tp::BuiltOptimizer built = tp::make_optimizer(o, model.state(), &depths);
    const auto& groups = built.optimizer->param_groups();
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const auto& group_options = static_cast<const torch::optim::AdamWOptions&>(groups[g].options());
      for (const std::string& name : built.group_names[g])
        std::printf("%s %a %a\n", name.c_str(), group_options.lr(), group_options.weight_decay());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "layer_decay_driver: %s\n", e.what());
    return 1;
  }
}
