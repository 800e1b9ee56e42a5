// An optimizer update that never needs the host (docs/cuda_graphs.md): the fused SGD, Adam and
// AdamW of optim.implementation = "fused" read their learning rates, Adam's step counts and the
// fp16 scaler's skip flag from tensors on the parameters' device, so one update is device work
// only. That is what lets a CUDA graph capture the step once and replay it with the lr a schedule
// sets later (a double argument would be baked into the graph), and what lets an fp16 step skip
// on an overflow without a host read.
#pragma once

#include <ATen/core/Tensor.h>

namespace torch::optim {
class Optimizer;
}

namespace tp {

/// Implemented by the fused optimizers (optim/fused_optimizers.h); device_step() finds it.
class DeviceStepOptimizer {
 public:
  virtual ~DeviceStepOptimizer() = default;

  /// [main, outside a graph capture] Writes every parameter group's current lr to the device
  /// tensor the kernels read (one fill per group on CUDA; nothing on the CPU, whose kernels take
  /// the lr as an argument). Call before every update, and before every replay of a captured one.
  virtual void stage_learning_rates() = 0;

  /// Whether the next update would start state whose first step the kernel must be told about
  /// on the host (SGD's momentum buffers: the kernel's is_first_step). Such a step cannot skip
  /// on the device; the caller decides it on the host (GradScaler::step) instead.
  virtual bool starts_state() const = 0;

  /// [main] One update of every parameter with a gradient, device work only: no host read, no
  /// allocation once the state exists. `found_inf` (a float32 scalar on the parameters' device,
  /// undefined: never skip) skips the update where it holds 1, as Python's fused optimizers do
  /// under torch.amp.GradScaler. The lrs are those stage_learning_rates() last wrote.
  virtual void step_on_device(const at::Tensor& found_inf) = 0;

  /// While true, an update that would create state (a parameter's first gradient) throws
  /// instead: state made under a graph capture would be re-zeroed by every replay.
  virtual void forbid_new_state(bool forbid) = 0;
};

/// `optimizer` as a DeviceStepOptimizer, or null for the per-parameter loops and RMSprop.
DeviceStepOptimizer* device_step(torch::optim::Optimizer& optimizer);

}  // namespace tp
