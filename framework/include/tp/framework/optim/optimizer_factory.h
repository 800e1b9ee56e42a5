// Builds the optimizer from [optim] over the model's parameters (docs/optimizers.md).
//
// Optimizers: sgd (momentum, dampening, nesterov), adam, adamw (amsgrad), rmsprop (alpha, centered,
// momentum), each the torch::optim class, so updates match Python's torch.optim step for step;
// lamb, timm's Lamb (bias_correction, grad_averaging, its own gradient clip, trust_clip,
// always_adapt), lion, timm's Lion (caution), and lars, timm's Lars (trust_coeff, trust_clip =
// LARC, always_adapt, momentum, dampening, nesterov), each a torch::optim::Optimizer of the host's
// (optim/lamb.h, optim/lion.h, optim/lars.h) with the same archive layout.
// `optim.implementation` picks how sgd/adam/adamw update: "fused" runs LibTorch's fused kernels
// (at::_fused_sgd_/_fused_adam_/_fused_adamw_, one call per group), "for_loop" the per-parameter
// loop, "auto" fused where a kernel exists for the optimizer, device and dtype. Both keep the
// same per-parameter state objects, so `save()`/`load()` archives are interchangeable.
//
// Parameter groups: frozen parameters (requires_grad = false) and buffers are left out. The
// default rule puts weight decay on tensors with dim >= 2 (weights) and none on dim < 2 (biases,
// norm scales), nanoGPT's rule. `[[optim.param_groups]]` rules (a shell glob on the parameter
// name, `*` crossing dots, first match wins) override lr and/or weight_decay. There is one torch
// group per (rule, decay/no-decay) pair that holds parameters: the default rule's groups first,
// then each rule's in file order; a rule that sets weight_decay has a single group.
//
// Layer-wise lr decay (`optim.layer_decay` < 1, timm's param_groups_layer_decay): each parameter
// has a depth from the model's declared ordering (ModelProxy::layer_depths: the longest dotted
// prefix that claims it; unclaimed parameters are the head, one past the deepest claimed depth),
// and its group's lr is multiplied by layer_decay^(deepest - depth). Every group above splits by
// depth, the deepest (unscaled) first, so the first group's lr is the schedule's own.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tp/framework/config/run_config.h"
#include "tp/framework/plugin/plugin_instance.h"

namespace torch::optim {
class Optimizer;
}

namespace tp {

/// A model's depth ordering: (dotted parameter-name prefix, depth), 0 = nearest the input.
using LayerDepths = std::vector<std::pair<std::string, uint32_t>>;

/// The optimizer and, for each of its parameter groups in order, the parameter names in it
/// (checkpoints use the names to stay readable).
struct BuiltOptimizer {
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::vector<std::vector<std::string>> group_names;
  /// True when step() runs LibTorch's fused kernels (implementation "fused", or "auto" where
  /// one exists); false for the per-parameter loop.
  bool fused = false;
  /// Parameters of `freeze = true` rules (in the optimizer, which skips them while they get no
  /// gradient) with their rule's unfreeze_at_epoch (0 = never). set_frozen() applies them.
  std::vector<std::pair<at::Tensor, int64_t>> frozen;
};

/// Freezes (requires_grad false) or unfreezes `built.frozen`'s parameters for 0-based `epoch`:
/// frozen while unfreeze_at_epoch is 0 or epoch + 1 < unfreeze_at_epoch. Returns whether any
/// parameter changed (data-parallel training then rebuilds its gradient all-reduce).
bool set_frozen(const BuiltOptimizer& built, int64_t epoch);

/// Whether LibTorch has a fused multi-tensor kernel for the optimizer `name` (optim.name): sgd,
/// adam and adamw do, rmsprop, lamb, lion and lars do not.
bool has_fused_kernel(std::string_view name);

/// Builds the optimizer `options.name` over the trainable parameters of `model_state` (which
/// must already be on the training device: "auto" decides by device and dtype). Logs nothing.
/// Throws ConfigError with the key path for an unknown optimizer (optim.name), nesterov without
/// momentum or with dampening (optim.nesterov), dampening with another optimizer than sgd or lars
/// (optim.dampening), amsgrad with lamb, lion or lars (optim.amsgrad), caution with another
/// optimizer than lion (optim.caution), "fused" where no fused kernel applies (optim.implementation), and
/// a param-group rule that matches no trainable parameter (optim.param_groups[i].pattern),
/// layer_decay outside (0, 1] (optim.layer_decay); tp::Error when no parameter is trainable.
/// `depths` (may be null: every parameter at one depth) applies when options.layer_decay < 1.
/// Example:
///   const LayerDepths depths = model->layer_depths();
///   BuiltOptimizer built = make_optimizer(config.optim, model->state(), &depths);
///   built.optimizer->step();
BuiltOptimizer make_optimizer(const OptimSection& options, const std::vector<StateTensor>& model_state,
                              const LayerDepths* depths = nullptr);

/// The train.log warning for a run that clips its gradients twice: LAMB with its own clip
/// (optim.lamb_max_grad_norm > 0) while the host clips too (`train_max_grad_norm`, the run's
/// train.max_grad_norm, > 0). Both then apply, in timm's order (timm's train.py with --clip-grad and
/// --opt lamb does the same); the warning names both keys. "" when the gradients are clipped once
/// or not at all.
std::string double_clip_warning(const OptimSection& optim, double train_max_grad_norm);

/// The learning rate of the first parameter group: the default rule's group when any parameter
/// falls under it, else the first rule's.
double current_lr(const torch::optim::Optimizer& optimizer);

}  // namespace tp
