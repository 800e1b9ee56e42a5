// An averaged copy of the model's weights: the exponential moving average of [ema] and the equal
// average of [swa] (docs/weight_averaging.md). Both follow PyTorch's
// torch.optim.swa_utils.AveragedModel: the average starts as a copy of the model, its first
// update copies the weights again, and every later update is one foreach lerp of the floating-
// point tensors towards the live ones, with get_ema_multi_avg_fn's or get_swa_multi_avg_fn's
// weight. Integer buffers (BatchNorm's num_batches_tracked) are always copied: a blended counter
// means nothing (PyTorch truncates a float blend into it).
//
// Memory: one more copy of the parameters and buffers, on the training device or, with
// `on_cpu`, in host memory (then each update costs a device-to-host copy of the weights).
// Evaluating the average swaps it into the model (SwappedInAverage), which holds the live
// weights in a second, temporary copy for the length of the evaluation.
//
// Data-parallel: every rank averages the same weights (the gradient all-reduce keeps them
// identical), so every rank holds the same average with no communication.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/plugin/plugin_instance.h"

namespace tp {

/// How an average folds in new weights.
struct AverageRule {
  enum class Kind { kExponential, kEqual };
  Kind kind = Kind::kExponential;
  double decay = 0.9999;       ///< kExponential: avg = decay x avg + (1 - decay) x weights
  bool warmup = false;         ///< kExponential: decay_n = min(decay, 1 - (1 + n)^(-2/3))
  bool average_buffers = true; ///< floating-point buffers averaged (PyTorch use_buffers=True) or copied

  /// The weight of the live weights in the update that follows `n` >= 1 averaged updates:
  /// 1 - decay_n (kExponential) or 1 / (n + 1) (kEqual, an equal average of n + 1 snapshots).
  double new_weight(int64_t n) const;
};

class WeightAverage {
 public:
  /// A copy of `model_state` on `device`, 0 updates averaged. `name` ("ema", "swa") names the
  /// checkpoint entry and the evaluation prefix ("val_ema/").
  WeightAverage(std::string name, AverageRule rule, const std::vector<StateTensor>& model_state, c10::Device device);

  /// Folds the model's current weights in (no autograd): the first update copies them, later ones
  /// lerp towards them by rule.new_weight(updates()). Non-floating-point tensors, and buffers when
  /// !average_buffers, are copied. `finite` (a 0-dim bool, FiniteWeightsWatch::finite()), when
  /// defined, gates the update on the device: where it is false the average keeps its values, so
  /// it never takes non-finite weights (the update still counts). Cost: one foreach lerp over the
  /// weights (with `finite`, one more pass choosing the inputs), no device sync.
  void update(const std::vector<StateTensor>& model_state, const at::Tensor& finite = {});

  const std::string& name() const noexcept { return name_; }
  /// Updates folded in so far (PyTorch's n_averaged).
  int64_t updates() const noexcept { return updates_; }
  /// The averaged tensors, named and ordered as the model's state.
  const std::vector<StateTensor>& state() const noexcept { return state_; }
  /// Bytes the average occupies.
  int64_t bytes() const;

  /// Restores a saved average with `updates` updates folded in. Throws tp::Error listing missing,
  /// unexpected and mis-shaped entries (as restore_weights does).
  void load(const NamedWeights& saved, int64_t updates);

 private:
  std::string name_;
  AverageRule rule_;
  std::vector<StateTensor> state_;
  int64_t updates_ = 0;
};

/// `state` as name -> tensor (detached views, no copy), the form restore_weights() and
/// WeightAverage::load() take.
NamedWeights named_weights(const std::vector<StateTensor>& state);

/// While alive, the model's tensors hold `average`'s values; the destructor copies the live
/// weights back (bitwise). Cost: two copies of the weights and a temporary copy of them.
class SwappedInAverage {
 public:
  SwappedInAverage(const WeightAverage& average, const std::vector<StateTensor>& model_state);
  ~SwappedInAverage();
  SwappedInAverage(const SwappedInAverage&) = delete;
  SwappedInAverage& operator=(const SwappedInAverage&) = delete;

 private:
  const std::vector<StateTensor>& model_state_;
  std::vector<at::Tensor> live_;
};

}  // namespace tp
