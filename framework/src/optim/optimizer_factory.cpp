#include "tp/framework/optim/optimizer_factory.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include "fused_optimizers.h"
#include "lamb.h"
#include "lars.h"
#include "lion.h"
#include "tp/framework/error.h"
#include "tp/framework/util/name_pattern.h"
#include "tp/framework/util/short_number.h"

namespace tp {
namespace {

// ~~~~ parameter groups ~~~~

/// One torch parameter group: its lr, weight decay and parameters (with their names).
struct GroupPlan {
  double lr = 0;
  double weight_decay = 0;
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
};

// A rule that only keeps BatchNorm statistics (freeze_bn_stats, engine/training/frozen_batchnorms.h)
// says nothing about the optimizer: it takes no parameter from the rules after it, and matching no
// trainable one (a teacher lent with requires_grad = false) is no dead rule.
bool claims_parameters(const ParamGroupRule& r) {
  return !r.freeze_bn_stats || r.freeze || r.lr.has_value() || r.weight_decay.has_value();
}

std::string rule_path(size_t i) { return "optim.param_groups[" + std::to_string(i) + "].pattern"; }

// The names in an error, so a pattern can be written from the message alone: no command lists a
// model's parameter names (ResNet-50 has 161, shown whole).
std::string some_names(const std::vector<std::string>& names) {
  constexpr size_t kShown = 200;
  std::string out;
  for (size_t i = 0; i < std::min(names.size(), kShown); ++i) out += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > kShown) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

[[noreturn]] void dead_rule(const OptimSection& o, size_t i, const std::vector<std::string>& trainable,
                            const std::vector<int>& winner) {
  const std::string& pattern = o.param_groups[i].pattern;
  for (size_t k = 0; k < trainable.size(); ++k)
    if (name_matches(pattern, trainable[k]))
      throw ConfigError(rule_path(i), rule_path(i) + " = \"" + pattern + "\" matches parameters, but each of them is "
                                          "claimed by an earlier rule (the first matching rule wins): '" + trainable[k] +
                                          "' by " + rule_path(static_cast<size_t>(winner[k])) +
                                          ". Reorder the [[optim.param_groups]] blocks or remove this one.");
  throw ConfigError(rule_path(i), rule_path(i) + " = \"" + pattern +
                                      "\" matches no trainable parameter. The model's trainable parameters: " +
                                      some_names(trainable) +
                                      ". A pattern is a shell glob over the whole "
                                      "name (`*` also crosses dots), e.g. \"head.*\" or \"*.bias\".");
}

// ~~~~ layer-wise lr decay ~~~~

/// Whether `prefix` claims `name`: equal, or a whole leading run of its dotted components.
bool claims(const std::string& prefix, const std::string& name) {
  return name.starts_with(prefix) && (name.size() == prefix.size() || name[prefix.size()] == '.');
}

/// Each parameter's depth (in model_state order, buffers left out) under the model's ordering:
/// the longest claiming prefix's; unclaimed parameters are the head, one past the deepest
/// claimed depth. Without an ordering every depth is 0.
std::vector<uint32_t> parameter_depths(const std::vector<StateTensor>& model_state, const LayerDepths* depths) {
  std::vector<uint32_t> out;
  std::vector<bool> claimed;
  uint32_t deepest_claimed = 0;
  const LayerDepths none;
  for (const auto& entry : model_state) {
    if (entry.is_buffer) continue;
    const std::pair<std::string, uint32_t>* best = nullptr;
    for (const auto& layer : depths != nullptr ? *depths : none)
      if (claims(layer.first, entry.name) && (best == nullptr || layer.first.size() > best->first.size())) best = &layer;
    out.push_back(best != nullptr ? best->second : 0);
    claimed.push_back(best != nullptr);
    if (best != nullptr) deepest_claimed = std::max(deepest_claimed, best->second);
  }
  for (size_t i = 0; depths != nullptr && i < out.size(); ++i)
    if (!claimed[i]) out[i] = deepest_claimed + 1;
  return out;
}

// ~~~~ groups ~~~~

// Slots: 2 per rule, the default rule (-1) first; slot 2(r+1) decays, 2(r+1)+1 does not. A rule
// that sets weight_decay applies it to all its parameters, so it uses its decay slot only. With
// layer decay each slot splits by depth, the deepest (full lr) first.
std::vector<GroupPlan> plan_groups(const OptimSection& o, const std::vector<StateTensor>& model_state,
                                   const LayerDepths* depths) {
  const size_t rules = o.param_groups.size();
  const std::vector<uint32_t> depth_of = parameter_depths(model_state, depths);
  const uint32_t deepest = depth_of.empty() ? 0 : *std::max_element(depth_of.begin(), depth_of.end());
  const size_t levels = size_t{deepest} + 1;
  std::vector<GroupPlan> slots(2 * (rules + 1) * levels);
  size_t parameter = 0; // index into depth_of
  std::vector<std::string> trainable;
  std::vector<int> winner;  // per trainable parameter: its rule, -1 = default
  std::vector<bool> used(rules, false);
  for (const auto& entry : model_state) {
    if (entry.is_buffer) continue;
    const uint32_t depth = depth_of[parameter++];
    if (!entry.tensor.requires_grad()) continue;
    int rule = -1;
    for (size_t i = 0; i < rules && rule < 0; ++i)
      if (claims_parameters(o.param_groups[i]) && name_matches(o.param_groups[i].pattern, entry.name))
        rule = static_cast<int>(i);
    const ParamGroupRule* r = rule >= 0 ? &o.param_groups[static_cast<size_t>(rule)] : nullptr;
    const bool decay = entry.tensor.dim() >= 2 || (r != nullptr && r->weight_decay.has_value());
    GroupPlan& g = slots[(2 * static_cast<size_t>(rule + 1) + (decay ? 0 : 1)) * levels + (deepest - depth)];
    if (g.params.empty()) {
      // timm's param_groups_layer_decay: scale = layer_decay^(deepest - depth), the head at 1.
      g.lr = (r != nullptr && r->lr ? *r->lr : o.lr) * std::pow(o.layer_decay, static_cast<double>(deepest - depth));
      g.weight_decay = r != nullptr && r->weight_decay ? *r->weight_decay : (decay ? o.weight_decay : 0.0);
    }
    g.params.push_back(entry.tensor);
    g.names.push_back(entry.name);
    trainable.push_back(entry.name);
    winner.push_back(rule);
    if (rule >= 0) used[static_cast<size_t>(rule)] = true;
  }
  if (trainable.empty())
    throw Error("the model has no trainable parameters (every parameter has requires_grad = false).");
  for (size_t i = 0; i < rules; ++i)
    if (!used[i] && claims_parameters(o.param_groups[i])) dead_rule(o, i, trainable, winner);
  std::erase_if(slots, [](const GroupPlan& g) { return g.params.empty(); });
  return slots;
}

// ~~~~ implementation choice ~~~~

bool use_fused(const OptimSection& o, const std::vector<GroupPlan>& plans) {
  if (o.implementation == "for_loop") return false;
  if (o.implementation != "auto" && o.implementation != "fused")
    throw ConfigError("optim.implementation", "optim.implementation = \"" + o.implementation +
                                                  "\" is not one of auto, fused, for_loop.");
  const bool explicit_fused = o.implementation == "fused";
  if (!has_fused_kernel(o.name)) {
    if (explicit_fused)
      throw ConfigError("optim.implementation",
                        "optim.implementation = \"fused\": LibTorch has no fused " + o.name + " kernel (it has fused "
                        "sgd, adam and adamw). Use \"auto\" or \"for_loop\" with " + o.name + ".");
    return false;
  }
  for (const GroupPlan& g : plans)
    for (size_t i = 0; i < g.params.size(); ++i) {
      const std::string reason = detail::fused_unsupported_reason(g.params[i]);
      if (reason.empty()) continue;
      if (!explicit_fused) return false;
      throw ConfigError("optim.implementation", "optim.implementation = \"fused\": parameter '" + g.names[i] + "' " +
                                                    reason + ". Use \"auto\" (fused only where a kernel applies) or "
                                                    "\"for_loop\".");
    }
  return true;
}

// ~~~~ construction ~~~~

// LAMB's options: the shared keys, then timm's Lamb switches. One field at a time: the setters
// LambOptions inherits return AdamWOptions&, so a chain would slice.
detail::LambOptions lamb_options(const OptimSection& o) {
  detail::LambOptions base(o.lr);
  base.betas({o.betas.at(0), o.betas.at(1)});
  base.eps(o.eps);
  base.weight_decay(o.weight_decay);
  base.bias_correction(o.bias_correction);
  base.grad_averaging(o.grad_averaging);
  base.max_grad_norm(o.lamb_max_grad_norm);
  base.trust_clip(o.trust_clip);
  base.always_adapt(o.always_adapt);
  return base;
}

// Lion's options: lr, betas and weight decay (decoupled, as timm's), then caution. One field at a
// time, as for LAMB.
detail::LionOptions lion_options(const OptimSection& o) {
  detail::LionOptions base(o.lr);
  base.betas({o.betas.at(0), o.betas.at(1)});
  base.weight_decay(o.weight_decay);
  base.caution(o.caution);
  return base;
}

// LARS's options: SGD's lr, momentum, dampening, nesterov and weight decay, then timm's Lars keys.
// One field at a time, as for LAMB.
detail::LarsOptions lars_options(const OptimSection& o) {
  detail::LarsOptions base(o.lr);
  base.momentum(o.momentum);
  base.dampening(o.dampening);
  base.nesterov(o.nesterov);
  base.weight_decay(o.weight_decay);
  base.trust_coeff(o.trust_coeff);
  base.eps(o.eps);
  base.trust_clip(o.trust_clip);
  base.always_adapt(o.always_adapt);
  return base;
}

// The keys that select a variant another optimizer has, refused by name rather than ignored:
// a run that asks for them expects them to act.
void refuse_other_variants(const OptimSection& o) {
  if (o.dampening != 0 && o.name != "sgd" && o.name != "lars")
    throw ConfigError("optim.dampening", "optim.dampening = " + short_number(o.dampening) + " damps SGD's momentum "
                                         "buffer; optim.name = \"" + o.name + "\" has none (sgd and lars have). "
                                         "Set dampening = 0.0.");
  if ((o.name == "sgd" || o.name == "lars") && o.nesterov && o.dampening != 0)
    throw ConfigError("optim.nesterov", "optim.nesterov = true needs optim.dampening = 0 (torch's and timm's rule: "
                                        "Nesterov's look-ahead assumes an undamped buffer); set dampening = 0.0 or "
                                        "nesterov = false.");
  if ((o.name == "lamb" || o.name == "lion" || o.name == "lars") && o.amsgrad)
    throw ConfigError("optim.amsgrad", "optim.amsgrad = true is an Adam/AdamW variant; " + o.name +
                                           " (optim.name = \"" + o.name + "\") has no AMSGrad form (timm's neither). "
                                           "Set amsgrad = false, or use adam or adamw.");
  if (o.caution && o.name != "lion")
    throw ConfigError("optim.caution", "optim.caution = true is Lion's cautious update (timm's clion), and "
                                       "optim.name = \"" + o.name + "\" has none. Set caution = false, or "
                                       "optim.name = \"lion\".");
}

template <typename Loop, typename Fused, typename Options>
std::unique_ptr<torch::optim::Optimizer> build(const std::vector<GroupPlan>& plans, const Options& base, bool fused) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.reserve(plans.size());
  for (const GroupPlan& g : plans) groups.emplace_back(g.params);
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (fused) {
    optimizer = std::make_unique<Fused>(groups, base);
  } else {
    optimizer = std::make_unique<Loop>(groups, base);
  }
  // Group options are set after construction: add_param_group() merges a group's own options
  // with the defaults by comparing each field with the options' constructor default, so a group
  // value that happens to equal that default (AdamW's weight_decay 0.01) would silently become
  // the optimizer-wide value.
  for (size_t i = 0; i < plans.size(); ++i) {
    auto options = std::make_unique<Options>(base);
    options->lr(plans[i].lr);
    options->weight_decay(plans[i].weight_decay);
    optimizer->param_groups()[i].set_options(std::move(options));
  }
  return optimizer;
}

}  // namespace

bool has_fused_kernel(std::string_view name) { return name == "sgd" || name == "adam" || name == "adamw"; }

BuiltOptimizer make_optimizer(const OptimSection& o, const std::vector<StateTensor>& model_state,
                              const LayerDepths* depths) {
  constexpr std::string_view kNames[] = {"sgd", "adam", "adamw", "rmsprop", "lamb", "lion", "lars"};
  if (std::find(std::begin(kNames), std::end(kNames), o.name) == std::end(kNames))
    throw ConfigError("optim.name", "optim.name = \"" + o.name +
                                        "\" is not a known optimizer (sgd, adam, adamw, rmsprop, lamb, lion, lars).");
  refuse_other_variants(o);
  if ((o.name == "sgd" || o.name == "lars") && o.nesterov && o.momentum <= 0)
    throw ConfigError("optim.nesterov", "optim.nesterov = true needs optim.momentum > 0 (Nesterov momentum is a "
                                        "look-ahead on the momentum buffer); set a momentum or nesterov = false.");
  if (o.layer_decay <= 0 || o.layer_decay > 1)
    throw ConfigError("optim.layer_decay", "optim.layer_decay = " + short_number(o.layer_decay) +
                                               " is outside (0, 1]: each layer's lr is lr x layer_decay^(deepest - "
                                               "depth), so above 1 the input layers would learn fastest. Typical "
                                               "fine-tuning values are 0.65 to 0.9; 1.0 turns it off.");
  const std::vector<GroupPlan> plans = plan_groups(o, model_state, o.layer_decay < 1 ? depths : nullptr);
  BuiltOptimizer built;
  for (const auto& entry : model_state) {
    if (entry.is_buffer || !entry.tensor.requires_grad()) continue;
    // The first matching rule wins, as in plan_groups.
    for (const ParamGroupRule& rule : o.param_groups)
      if (claims_parameters(rule) && name_matches(rule.pattern, entry.name)) {
        if (rule.freeze) built.frozen.emplace_back(entry.tensor, rule.unfreeze_at_epoch);
        break;
      }
  }
  built.fused = use_fused(o, plans);
  for (const GroupPlan& g : plans) built.group_names.push_back(g.names);
  namespace optim = torch::optim;
  if (o.name == "sgd") {
    const auto base = optim::SGDOptions(o.lr).momentum(o.momentum).dampening(o.dampening).nesterov(o.nesterov)
                          .weight_decay(o.weight_decay);
    built.optimizer = build<optim::SGD, detail::FusedSGD>(plans, base, built.fused);
  } else if (o.name == "adam") {
    const auto base = optim::AdamOptions(o.lr).betas({o.betas.at(0), o.betas.at(1)}).eps(o.eps)
                          .weight_decay(o.weight_decay).amsgrad(o.amsgrad);
    built.optimizer = build<optim::Adam, detail::FusedAdam>(plans, base, built.fused);
  } else if (o.name == "adamw") {
    const auto base = optim::AdamWOptions(o.lr).betas({o.betas.at(0), o.betas.at(1)}).eps(o.eps)
                          .weight_decay(o.weight_decay).amsgrad(o.amsgrad);
    built.optimizer = build<optim::AdamW, detail::FusedAdamW>(plans, base, built.fused);
  } else if (o.name == "lamb") {
    built.optimizer = build<detail::Lamb, detail::Lamb>(plans, lamb_options(o), /*fused=*/false);  // no fused kernel
  } else if (o.name == "lion") {
    built.optimizer = build<detail::Lion, detail::Lion>(plans, lion_options(o), /*fused=*/false);  // no fused kernel
  } else if (o.name == "lars") {
    built.optimizer = build<detail::Lars, detail::Lars>(plans, lars_options(o), /*fused=*/false);  // no fused kernel
  } else {
    const auto base = optim::RMSpropOptions(o.lr).alpha(o.alpha).eps(o.eps).weight_decay(o.weight_decay)
                          .momentum(o.momentum).centered(o.centered);
    built.optimizer = build<optim::RMSprop, optim::RMSprop>(plans, base, /*fused=*/false);  // no fused kernel
  }
  return built;
}

std::string double_clip_warning(const OptimSection& optim, double train_max_grad_norm) {
  if (optim.name != "lamb" || optim.lamb_max_grad_norm <= 0 || train_max_grad_norm <= 0) return "";
  return "gradients are clipped twice: first to train.max_grad_norm = " + short_number(train_max_grad_norm) +
         " by the host, then LAMB divides them by max(1, global norm / optim.lamb_max_grad_norm = " +
         short_number(optim.lamb_max_grad_norm) + ") inside its step (timm's --clip-grad with --opt lamb does the "
         "same). Set optim.lamb_max_grad_norm = 0 to clip once, by the host, or train.max_grad_norm = 0 for timm's "
         "Lamb alone.";
}

bool set_frozen(const BuiltOptimizer& built, int64_t epoch) {
  bool changed = false;
  for (const auto& [param, unfreeze_at] : built.frozen) {
    const bool frozen = unfreeze_at == 0 || epoch + 1 < unfreeze_at;
    if (param.requires_grad() == !frozen) continue;
    param.requires_grad_(!frozen);
    changed = true;
  }
  return changed;
}

double current_lr(const torch::optim::Optimizer& optimizer) {
  const auto& group = optimizer.param_groups().front();
  return group.options().get_lr();
}

}  // namespace tp
