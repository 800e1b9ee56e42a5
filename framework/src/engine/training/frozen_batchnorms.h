// The BatchNorm layers a parameter-group rule's `freeze_bn_stats` names (docs/optimizers.md,
// "Parameter groups"): a frozen teacher inside the model keeps the statistics it was loaded with.
#pragma once

#include <string>
#include <vector>

#include "tp/framework/config/run_config.h"
#include "tp/framework/plugin/plugin_instance.h"

namespace tp {

/// The dotted names of the model's BatchNorm layers that the rules with freeze_bn_stats = true
/// match, in state order, each once: a layer is the prefix P of a buffer "P.running_mean", and a
/// rule matches it when its pattern matches one of P's state names (P.weight, P.running_mean, ...),
/// as the rule's other settings match parameters (a shell glob, Python's fnmatchcase). Throws
/// ConfigError naming optim.param_groups[i].freeze_bn_stats when such a rule matches no BatchNorm
/// layer (a pattern naming parameters of layers without running statistics).
std::vector<std::string> frozen_batchnorm_layers(const std::vector<StateTensor>& state,
                                                 const std::vector<ParamGroupRule>& rules);

}  // namespace tp
