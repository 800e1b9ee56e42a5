// Whether the weights are finite, on the device (docs/hardening.md, "Non-finite weights"): a
// diverging run must never save, average or resume from inf/NaN weights. A step's update can
// turn finite weights non-finite while the loss it came from was finite (a huge lr), so the
// loss checks of train.nan_policy alone do not protect the checkpoints and the averages.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "tp/framework/plugin/plugin_instance.h"

namespace tp {

/// A 0-dim bool tensor on the tensors' device: true when every floating-point element of
/// `state` is finite (integer tensors are always finite). No host read. Cost: one pass over the
/// tensors (CUDA: one fused foreach max-abs norm; CPU: a sum per tensor, 16 ms for ResNet-50's
/// 25.6M weights on one core). On the CPU a sum of finite values too large for float32 (every
/// weight around 1e31 or more) also reads as non-finite; exactly_finite() tells them apart.
at::Tensor all_finite(const std::vector<StateTensor>& state);

/// Whether every floating-point element of `state` is finite, element by element, read on the
/// host (a sync on CUDA). For confirming what all_finite() flagged, where a host read happens anyway.
bool exactly_finite(const std::vector<StateTensor>& state);

/// The live weights watched after every update, without a host read: the step runner asks it
/// whether the EMA may fold the weights in, and the save path asks it where the weights first
/// became non-finite.
class FiniteWeightsWatch {
 public:
  /// After the update of optimizer step `step` (1-based): records whether `state` is finite,
  /// and `step` as the first non-finite one if it is the first. On the device.
  void observe(const std::vector<StateTensor>& state, int64_t step);
  /// The last observation (0-dim bool on the device); undefined before the first.
  const at::Tensor& finite() const noexcept { return finite_; }
  /// The first step whose update left the weights non-finite, or -1 when none did (or nothing
  /// was observed). A host read: a device sync on CUDA, for errors and saves only.
  int64_t first_non_finite_step() const;

 private:
  at::Tensor finite_;
  at::Tensor first_bad_step_; ///< int64 0-dim on the device, -1 while every observation was finite
};

}  // namespace tp
