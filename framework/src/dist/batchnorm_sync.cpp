#include "tp/framework/dist/batchnorm_sync.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <map>

#include "tp/framework/dist/collectives.h"

namespace tp {

bool is_batchnorm_statistic(const std::string& name) {
  for (const std::string suffix : {"running_mean", "running_var"})
    if (name.ends_with(suffix) && (name.size() == suffix.size() || name[name.size() - suffix.size() - 1] == '.'))
      return true;
  return false;
}

int64_t sync_batchnorm_statistics(Collectives& dist, const std::vector<const std::vector<StateTensor>*>& states,
                                  BatchNormSync how) {
  std::vector<at::Tensor> stats;
  for (const auto* state : states)
    for (const auto& s : *state)
      if (s.is_buffer && s.tensor.is_floating_point() && is_batchnorm_statistic(s.name)) stats.push_back(s.tensor.detach());
  if (stats.empty()) return 0;
  c10::NoGradGuard no_grad;
  if (how == BatchNormSync::kBroadcast) {
    dist.broadcast(stats, "broadcast rank 0's BatchNorm statistics (dist.bn_stats)");
    return static_cast<int64_t>(stats.size());
  }
  // One flat buffer per dtype: a resnet50 has 106 statistics tensors, one collective each would
  // pay 106 latencies.
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const auto& t : stats) by_dtype[t.scalar_type()].push_back(t);
  for (auto& [dtype, tensors] : by_dtype) {
    std::vector<at::Tensor> flat_parts;
    for (const auto& t : tensors) flat_parts.push_back(t.reshape({-1}));
    std::vector<at::Tensor> flat = {at::cat(flat_parts)};
    dist.all_reduce_sum(flat, "average the BatchNorm statistics over ranks (dist.bn_stats = \"reduce\")");
    flat[0].div_(static_cast<double>(dist.world_size()));
    int64_t offset = 0;
    for (auto& t : tensors) {
      t.copy_(flat[0].narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
  return static_cast<int64_t>(stats.size());
}

}  // namespace tp
