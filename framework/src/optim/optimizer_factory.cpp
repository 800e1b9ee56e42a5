#include "tp/framework/optim/optimizer_factory.h"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "tp/framework/error.h"

namespace tp {
namespace {

struct Groups {
  std::vector<at::Tensor> decay, no_decay;
  std::vector<std::string> decay_names, no_decay_names;
};

Groups split_groups(const std::vector<StateTensor>& state) {
  Groups g;
  for (const auto& entry : state) {
    if (entry.is_buffer || !entry.tensor.requires_grad()) continue;
    if (entry.tensor.dim() >= 2) {
      g.decay.push_back(entry.tensor);
      g.decay_names.push_back(entry.name);
    } else {
      g.no_decay.push_back(entry.tensor);
      g.no_decay_names.push_back(entry.name);
    }
  }
  return g;
}

template <typename Options>
std::vector<torch::optim::OptimizerParamGroup> make_groups(Groups& g, const Options& base, double weight_decay,
                                                           std::vector<std::vector<std::string>>& names) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (!g.decay.empty()) {
    auto options = std::make_unique<Options>(base);
    options->weight_decay(weight_decay);
    groups.emplace_back(g.decay, std::move(options));
    names.push_back(g.decay_names);
  }
  if (!g.no_decay.empty()) {
    auto options = std::make_unique<Options>(base);
    options->weight_decay(0.0);
    groups.emplace_back(g.no_decay, std::move(options));
    names.push_back(g.no_decay_names);
  }
  return groups;
}

}  // namespace

BuiltOptimizer make_optimizer(const OptimSection& o, const std::vector<StateTensor>& model_state) {
  Groups g = split_groups(model_state);
  if (g.decay.empty() && g.no_decay.empty())
    throw Error("the model has no trainable parameters (every parameter has requires_grad = false).");
  BuiltOptimizer built;
  if (o.name == "sgd") {
    auto base = torch::optim::SGDOptions(o.lr).momentum(o.momentum).nesterov(o.nesterov);
    auto groups = make_groups(g, base, o.weight_decay, built.group_names);
    built.optimizer = std::make_unique<torch::optim::SGD>(std::move(groups), base);
  } else if (o.name == "adamw") {
    auto base = torch::optim::AdamWOptions(o.lr).betas({o.betas.at(0), o.betas.at(1)}).eps(o.eps);
    auto groups = make_groups(g, base, o.weight_decay, built.group_names);
    built.optimizer = std::make_unique<torch::optim::AdamW>(std::move(groups), base);
  } else {
    throw ConfigError("optim.name", "optim.name = \"" + o.name + "\" is not a known optimizer (sgd, adamw).");
  }
  return built;
}

double current_lr(const torch::optim::Optimizer& optimizer) {
  const auto& group = optimizer.param_groups().front();
  return group.options().get_lr();
}

}  // namespace tp
