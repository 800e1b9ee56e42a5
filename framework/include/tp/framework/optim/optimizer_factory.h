// Builds the optimizer from [optim] over the model's parameters, with the default parameter
// groups: weight decay on tensors with dim >= 2 (weights), none on dim < 2 (biases, norm scales),
// frozen parameters (requires_grad = false) left out (nanoGPT's rule).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tp/framework/config/run_config.h"
#include "tp/framework/plugin/plugin_instance.h"

namespace torch::optim {
class Optimizer;
}

namespace tp {

/// The optimizer and, for each of its parameter groups in order, the parameter names in it
/// (checkpoints use the names to stay readable).
struct BuiltOptimizer {
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::vector<std::vector<std::string>> group_names;
};

/// Throws ConfigError (optim.name) for an unknown optimizer and tp::Error when no parameter is
/// trainable.
BuiltOptimizer make_optimizer(const OptimSection& options, const std::vector<StateTensor>& model_state);

/// The learning rate of the first parameter group.
double current_lr(const torch::optim::Optimizer& optimizer);

}  // namespace tp
