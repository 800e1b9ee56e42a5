// The state each rank of bn_sync_driver starts from, shared with bn_stats_test.cpp so the test
// knows every rank's values without reading them back.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "tp/framework/plugin/plugin_instance.h"

namespace tp::test {

/// Rank `rank`'s model state: BatchNorm statistics in float32 and float64 (one collective per
/// dtype), and entries the synchronisation must leave alone (a parameter, num_batches_tracked,
/// another buffer, a statistic-like name that is not one). Values are rank-specific and not
/// exactly representable halves, so a reduce computed another way shows in the last bits.
inline std::vector<StateTensor> bn_sync_model_state(int rank) {
  const double r = rank + 1;
  return {
      {"trunk.bn1.weight", at::full({4}, 0.3 * r, at::kFloat), false},
      {"trunk.bn1.running_mean", at::arange(4, at::kFloat).mul_(0.1f * r).add_(1.0f / 3.0f), true},
      {"trunk.bn1.running_var", at::arange(4, at::kFloat).mul_(0.7f * r).add_(1.1f), true},
      {"trunk.bn1.num_batches_tracked", at::full({}, 10 * rank, at::kLong), true},
      {"head.bn.running_mean", at::arange(3, at::kDouble).mul_(0.2 * r).add_(1.0 / 7.0), true},
      {"head.bn.running_var", at::arange(3, at::kDouble).mul_(0.9 * r).add_(0.5), true},
      {"head.anchor", at::full({2}, 5.0 * r, at::kFloat), true},
      {"head.not_running_mean", at::full({2}, 7.0 * r, at::kFloat), true},
  };
}

/// Rank `rank`'s averaged-weights state (an EMA's): one more float32 statistic.
inline std::vector<StateTensor> bn_sync_average_state(int rank) {
  return {{"trunk.bn1.running_mean", at::arange(5, at::kFloat).mul_(0.05f * (rank + 1)).add_(0.2f), true}};
}

}  // namespace tp::test
