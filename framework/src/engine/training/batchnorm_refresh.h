// PyTorch's torch.optim.swa_utils.update_bn for a plugin model: recompute the BatchNorm running
// statistics of the current weights as the equal average of every training batch's statistics
// (BatchNorm with momentum=None), after stochastic weight averaging has changed the weights the
// statistics were collected for (docs/weight_averaging.md).
//
// The host sees a plugin's tensors, not its modules, so it cannot set momentum = None. Instead:
// BatchNorm layers are found by their buffers (`<layer>.running_mean`, `<layer>.running_var`,
// `<layer>.num_batches_tracked`, PyTorch's names), each layer's momentum m is measured once
// (two forwards of the first batch from running statistics 0 and 1, with the same random state:
// the difference is 1 - m), and every batch's statistics are read as m x stat from running
// statistics zeroed before its forward. Cost: one forward pass over the training split (no
// backward) plus one forward; the result equals update_bn's to float rounding (~1e-7 relative).
#pragma once

#include <cstdint>
#include <vector>

#include "tp/framework/data/data_loader.h"
#include "tp/framework/engine/batch_placement.h"
#include "tp/framework/engine/run_components.h"

namespace tp {

class Collectives;

/// [all ranks] Recomputes the running statistics of every BatchNorm layer of `parts.model`
/// (found in `model_state`) over `batches` batches of `loader`'s epoch `epoch`. Data-parallel:
/// the per-rank sums are all-reduced, so every rank gets the statistics of all ranks' batches.
/// Returns the number of layers recomputed (0: the model has no BatchNorm buffers, or none in
/// training mode; nothing changes then). Leaves the model in training mode.
int64_t refresh_batchnorm_statistics(RunComponents& parts, const std::vector<StateTensor>& model_state,
                                     DataLoader& loader, uint64_t epoch, int64_t batches,
                                     const BatchPlacement& placement, Collectives& collectives);

}  // namespace tp
