// torch::optim::SGD, Adam and AdamW whose step() runs LibTorch's fused kernels
// (at::_fused_sgd_, at::_fused_adam_, at::_fused_adamw_) over all parameters of a group at once,
// as Python's `torch.optim.X(..., fused=True)` does, and whose update can run as device work only
// (DeviceStepOptimizer: what a captured CUDA graph replays, docs/cuda_graphs.md).
//
// Why subclasses: they keep the base class's per-parameter state objects (SGDParamState,
// AdamParamState, AdamWParamState) in the same map, with the same keys and the integer step
// count, so `save()`/`load()` are the base class's and an archive written by the fused path
// loads into the loop path and back. Options are read from each group at every step, so
// schedules that change lr, momentum or beta1 between steps (OneCycle) take effect.
//
// Where the numbers live: on CUDA the kernels read each group's lr from a float32 tensor on the
// device (the kernels' capturable form; the value is the option rounded to float32, in eager and
// graphed runs alike, so both take bit-identical steps), and Adam's step counts are float32
// tensors beside the parameters, incremented by the update itself (on the host too, mirrored into
// the state objects, except for device-only updates: save() reads them back first). On the CPU
// the kernels take the lr as a double, unrounded, as torch.optim's fused CPU path does.
//
// What it costs: a layout fix-up copy only for state tensors whose layout differs from the
// parameter's (state loaded from a checkpoint for a channels-last parameter, once), one lr fill
// per group and step on CUDA, one host read of Adam's counts per save. The SGD is
// fused_optimizers.cpp's, Adam and AdamW fused_adam.cpp's. Private to the optimizer factory.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "tp/framework/optim/device_step.h"

namespace tp::detail {

/// Each group's lr as the fused kernels read it: a float32 scalar on CUDA (filled by
/// stage_learning_rates()), nothing on the CPU (the kernels take the double).
class DeviceLearningRates {
 public:
  /// [main] Writes every group's lr to its tensor (created on the first call on the group's device).
  void stage(torch::optim::Optimizer& optimizer);
  /// Group `index`'s staged lr tensor; undefined for a group on the CPU.
  const at::Tensor& of(size_t index) const;

 private:
  std::vector<at::Tensor> lrs_;
};

/// SGD with momentum, dampening, nesterov and L2 weight decay through at::_fused_sgd_.
/// A parameter's first update with momentum copies its gradient into a new momentum buffer,
/// exactly as the loop does.
class FusedSGD : public torch::optim::SGD, public DeviceStepOptimizer {
 public:
  using torch::optim::SGD::SGD;
  /// One update of every parameter with a gradient. [main]
  torch::Tensor step(LossClosure closure = nullptr) override;
  void stage_learning_rates() override { lrs_.stage(*this); }
  bool starts_state() const override;
  void step_on_device(const at::Tensor& found_inf) override;
  void forbid_new_state(bool forbid) override { forbid_new_state_ = forbid; }

 private:
  DeviceLearningRates lrs_;
  bool forbid_new_state_ = false;
};

/// Adam or AdamW (`Base`, with its `State` and `Options` classes) through `Kernel`'s fused ATen
/// kernel (fused_adam.cpp: at::_fused_adam_, at::_fused_adamw_). Adam's step counts live twice:
/// the integer in each state object, which save()/load() archive, and a float32 tensor beside the
/// parameter, which the update advances on the device (and takes back for a skipped fp16 step).
template <typename Base, typename State, typename Options, typename Kernel>
class FusedAdamFamily : public Base, public DeviceStepOptimizer {
 public:
  using Base::Base;
  /// One update of every parameter with a gradient. [main]
  torch::Tensor step(torch::optim::Optimizer::LossClosure closure = nullptr) override;
  void stage_learning_rates() override { lrs_.stage(*this); }
  bool starts_state() const override { return false; } // fresh moments are zeros; no first-step flag
  void step_on_device(const at::Tensor& found_inf) override;
  void forbid_new_state(bool forbid) override { forbid_new_state_ = forbid; }
  /// The base class's archive, after the device step counts are read back into the state
  /// objects (one host read).
  void save(torch::serialize::OutputArchive& archive) const override;
  /// The base class's load; the device step counts are made again from the loaded ones.
  void load(torch::serialize::InputArchive& archive) override;

 private:
  /// The device step count of `param`, made from its state object's count on first use.
  at::Tensor& device_step_of(const at::Tensor& param, int64_t host_step);

  DeviceLearningRates lrs_;
  bool forbid_new_state_ = false;
  std::unordered_map<const c10::TensorImpl*, at::Tensor> device_steps_;
};

struct AdamKernel;  ///< at::_fused_adam_ (fused_adam.cpp)
struct AdamWKernel; ///< at::_fused_adamw_ (fused_adam.cpp)

/// Adam (L2 weight decay added to the gradient, amsgrad) through at::_fused_adam_.
using FusedAdam =
    FusedAdamFamily<torch::optim::Adam, torch::optim::AdamParamState, torch::optim::AdamOptions, AdamKernel>;
/// AdamW (decoupled weight decay, amsgrad) through at::_fused_adamw_.
using FusedAdamW =
    FusedAdamFamily<torch::optim::AdamW, torch::optim::AdamWParamState, torch::optim::AdamWOptions, AdamWKernel>;
// Defined and instantiated once, in fused_adam.cpp.
extern template class FusedAdamFamily<torch::optim::Adam, torch::optim::AdamParamState, torch::optim::AdamOptions,
                                      AdamKernel>;
extern template class FusedAdamFamily<torch::optim::AdamW, torch::optim::AdamWParamState, torch::optim::AdamWOptions,
                                      AdamWKernel>;

/// Empty when LibTorch's fused optimizer kernels can update `param` (a dense, non-overlapping
/// float/double/half/bfloat16 tensor on CPU or CUDA); otherwise why not, for an error message.
std::string fused_unsupported_reason(const at::Tensor& param);

}  // namespace tp::detail
