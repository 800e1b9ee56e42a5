// The host's form of a sample and of a batch: named tensors in a fixed order.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace tp {

/// One sample or one batch: named tensors in a fixed order (the order of the first sample).
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

}  // namespace tp
