// Compares the model weights of two checkpoints (accumulation, DDP and resume tests).
#pragma once

#include <ATen/ATen.h>

#include <algorithm>

#include "tp/framework/checkpoint/checkpoint.h"

#include <doctest/doctest.h>

namespace tp::test {

/// The largest over tensors of max|a - b| / max|a|; the tensor names must match in order.
inline double max_relative_difference(const tp::LoadedCheckpoint& a, const tp::LoadedCheckpoint& b) {
  REQUIRE(a.model.size() == b.model.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.model.size(); ++i) {
    REQUIRE(a.model[i].first == b.model[i].first);
    const at::Tensor& x = a.model[i].second;
    const at::Tensor& y = b.model[i].second;
    worst = std::max(worst, ((x - y).abs().max() / (x.abs().max() + 1e-12)).item<double>());
  }
  return worst;
}

}  // namespace tp::test
