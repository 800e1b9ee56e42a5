// Adaptive gradient clipping (Brock et al., "High-Performance Large-Scale Image Recognition
// Without Normalization", the NFNets' AGC), as timm 1.0.31's adaptive_clip_grad computes it:
// per output unit (a conv's or linear layer's output channel: the first dimension; a 0- or 1-D
// tensor is one unit), a gradient whose norm exceeds clip_factor x max(||w||, eps) is scaled
// down to that norm. train.agc_clip_factor turns it on (docs/training.md, "Gradient clipping");
// ParameterUpdate applies it once per optimizer step, after unscaling, in place of the norm and
// value clips (config validation refuses it beside them).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "tp/framework/plugin/plugin_instance.h"

namespace tp {

/// timm's unitwise_norm: the `norm_type`-norm of `x` whole when it has at most one dimension
/// (a 0-dim tensor), else one norm per index of the first dimension over all the others, with
/// those kept as size 1 (so it broadcasts against `x`).
at::Tensor unitwise_norm(const at::Tensor& x, double norm_type);

/// timm's adaptive_clip_grad: for every parameter of `params` with a gradient, the gradient's
/// unit-wise norm g and the weight's w' = max(unitwise_norm(w), eps) x clip_factor; where
/// g >= w' the unit's gradient becomes grad x w' / max(g, 1e-6), elsewhere it stays. In place
/// (the same .grad tensors), device work only: no host read.
/// Example:
///   adaptive_clip_grad({conv.weight, conv.bias}, /*clip_factor=*/0.01);
void adaptive_clip_grad(const std::vector<at::Tensor>& params, double clip_factor, double norm_type = 2.0,
                        double eps = 1e-3);

/// The parameters AGC clips: those of `model_state` (never its buffers) whose names match none
/// of the `ignore` globs (train.agc_ignore; Python's fnmatch.fnmatchcase, `*` crossing dots), in
/// model order. Frozen parameters are included: they have no gradient while frozen, and AGC
/// skips those. Throws ConfigError naming train.agc_ignore[i] for a glob that matches no
/// parameter (the message lists the names).
std::vector<at::Tensor> agc_parameters(const std::vector<StateTensor>& model_state,
                                       const std::vector<std::string>& ignore);

}  // namespace tp
