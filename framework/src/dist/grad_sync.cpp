#include "tp/framework/dist/grad_sync.h"

#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <algorithm>
#include <unordered_map>

#include "tp/framework/dist/dist_context.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

// PyTorch's DDP default: a small first bucket starts communication early in backward, the
// rest use dist.bucket_mb (dist._DEFAULT_FIRST_BUCKET_BYTES).
constexpr int64_t kFirstBucketBytes = int64_t{1} << 20;

}  // namespace

GradSync::GradSync(DistContext& dist, const std::vector<StateTensor>& state) {
  std::vector<at::Tensor> params;
  std::unordered_map<size_t, std::string> names;
  for (const auto& s : state)
    if (!s.is_buffer && s.tensor.requires_grad()) {
      names.emplace(params.size(), s.name);
      params.push_back(s.tensor);
    }
  TP_CHECK(!params.empty(), "data-parallel training needs at least one trainable parameter");
  const auto cap = static_cast<int64_t>(dist.options().bucket_mb * double(1 << 20));
  try {
    // Same count, shapes and dtypes on every rank, or the buckets would not line up.
    c10d::verify_params_across_processes(dist.group(), params, std::nullopt);
    // Buckets in parameter order, then reversed: backward produces the last layers' gradients
    // first, so the first bucket to fill is the first one reduced (what Python's DDP does).
    auto [buckets, limits] = c10d::compute_bucket_assignment_by_size(
        params, {static_cast<size_t>(kFirstBucketBytes), static_cast<size_t>(cap)}, std::vector<bool>(params.size(), false));
    std::reverse(buckets.begin(), buckets.end());
    std::vector<int64_t> caps(limits.rbegin(), limits.rend());
    for (const auto& bucket : buckets) {
      int64_t bytes = 0;
      for (size_t i : bucket) bytes += params[i].numel() * static_cast<int64_t>(params[i].element_size());
      bucket_bytes_.push_back(bytes);
    }
    reducer_ = std::make_unique<c10d::Reducer>(
        params, std::move(buckets), dist.group(), std::vector<bool>(params.size(), false), cap,
        dist.options().find_unused_parameters, /*gradient_as_bucket_view=*/false, std::move(names), kFirstBucketBytes,
        /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false, std::move(caps));
  } catch (const tp::Error&) {
    throw;
  } catch (const std::exception& e) {
    dist.fail("set up gradient buckets (parameter shapes must match on all ranks)", e);
  }
}

GradSync::~GradSync() = default;

void GradSync::before_forward(bool sync) {
  // Once per run, after the first synchronised backward: a broadcast of the new bucket order.
  reducer_->rebuild_buckets();
  if (sync) reducer_->prepare_for_forward();
}

void GradSync::before_backward(const at::Tensor& loss, bool sync) {
  // Arming the reducer is what makes backward communicate; skipping it is no_sync. With
  // find_unused_parameters it walks the graph from the loss to mark parameters that get no
  // gradient (an extra traversal per step, which is why it is off by default).
  if (sync) reducer_->prepare_for_backward({loss});
}

}  // namespace tp
