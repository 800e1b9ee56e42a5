// dist.bn_stats (docs/distributed.md, "BatchNorm statistics"): under data-parallel training each
// rank's BatchNorm layers update their running statistics from its own batches, so after the last
// forward before an evaluation or a save the ranks hold different statistics, and a sharded
// evaluation would mix them. Before every evaluation and save the trainer makes them equal here:
// "broadcast" takes rank 0's, "reduce" their mean over the ranks (timm's distribute_bn).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tp/framework/config/choices.h" // BatchNormSync (dist.bn_stats)
#include "tp/framework/plugin/plugin_instance.h"

namespace tp {

class Collectives;

/// Whether the state entry `name` is a BatchNorm running statistic: PyTorch's buffer names
/// "<layer>.running_mean" and "<layer>.running_var" (num_batches_tracked agrees over ranks).
bool is_batchnorm_statistic(const std::string& name);

/// [all ranks, collective] Makes the BatchNorm running statistics among the buffers of every
/// state in `states` (the model's, the EMA's, ...) equal on all ranks, in place: rank 0's, or the
/// mean over ranks computed in each tensor's own dtype, as timm's distribute_bn(reduce=True):
/// `all_reduce(buf, SUM); buf /= world_size`. One collective per dtype over a flat copy, whatever
/// the number of layers. Returns the number of tensors synchronised (0: no collective ran).
int64_t sync_batchnorm_statistics(Collectives& dist, const std::vector<const std::vector<StateTensor>*>& states,
                                  BatchNormSync how);

}  // namespace tp
