// torch::optim::SGD, Adam and AdamW whose step() runs LibTorch's fused kernels
// (at::_fused_sgd_, at::_fused_adam_, at::_fused_adamw_) over all parameters of a group at once,
// as Python's `torch.optim.X(..., fused=True)` does.
//
// Why subclasses: they keep the base class's per-parameter state objects (SGDParamState,
// AdamParamState, AdamWParamState) in the same map, with the same keys and the integer step
// count, so `save()`/`load()` are the base class's and an archive written by the fused path
// loads into the loop path and back. Options are read from each group at every step, so
// schedules that change lr, momentum or beta1 between steps (OneCycle) take effect.
//
// What it costs: per step and group, one small host-to-device copy of the step counts (Adam;
// the kernels read them from device tensors), and a layout fix-up copy only for state tensors
// whose layout differs from the parameter's (state loaded from a checkpoint for a channels-last
// parameter, once). Private to the optimizer factory.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <string>
#include <vector>

namespace tp::detail {

/// SGD with momentum, dampening, nesterov and L2 weight decay through at::_fused_sgd_.
/// A parameter's first update with momentum copies its gradient into a new momentum buffer,
/// exactly as the loop does.
class FusedSGD : public torch::optim::SGD {
 public:
  using torch::optim::SGD::SGD;
  /// One update of every parameter with a gradient. [main]
  torch::Tensor step(LossClosure closure = nullptr) override;
};

/// Adam (L2 weight decay added to the gradient, amsgrad) through at::_fused_adam_.
class FusedAdam : public torch::optim::Adam {
 public:
  using torch::optim::Adam::Adam;
  /// One update of every parameter with a gradient. [main]
  torch::Tensor step(LossClosure closure = nullptr) override;
};

/// AdamW (decoupled weight decay, amsgrad) through at::_fused_adamw_.
class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  /// One update of every parameter with a gradient. [main]
  torch::Tensor step(LossClosure closure = nullptr) override;
};

/// Empty when LibTorch's fused optimizer kernels can update `param` (a dense, non-overlapping
/// float/double/half/bfloat16 tensor on CPU or CUDA); otherwise why not, for an error message.
std::string fused_unsupported_reason(const at::Tensor& param);

}  // namespace tp::detail
