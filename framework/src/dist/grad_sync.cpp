#include "tp/framework/dist/grad_sync.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <algorithm>
#include <unordered_map>

#include "tp/framework/dist/dist_context.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

// PyTorch's DDP default: a small first bucket starts communication early in backward, the
// rest use dist.bucket_mb (dist._DEFAULT_FIRST_BUCKET_BYTES). Capped by dist.bucket_mb, so a
// smaller setting really gives small buckets.
constexpr int64_t kFirstBucketBytes = int64_t{1} << 20;

}  // namespace

GradSync::GradSync(DistContext& dist, const std::vector<StateTensor>& state, bool overlap) : dist_(dist) {
  std::vector<at::Tensor> params;
  std::unordered_map<size_t, std::string> names;
  for (const auto& s : state)
    if (!s.is_buffer && s.tensor.requires_grad()) {
      names.emplace(params.size(), s.name);
      params.push_back(s.tensor);
    }
  TP_CHECK(!params.empty(), "data-parallel training needs at least one trainable parameter");
  const auto cap = static_cast<int64_t>(dist.options().bucket_mb * double(1 << 20));
  const int64_t first_cap = std::min(kFirstBucketBytes, cap);
  try {
    // Same count, shapes and dtypes on every rank, or the buckets would not line up.
    c10d::verify_params_across_processes(dist.group(), params, std::nullopt);
    // Buckets in parameter order, then reversed: backward produces the last layers' gradients
    // first, so the first bucket to fill is the first one reduced (what Python's DDP does).
    auto [buckets, limits] = c10d::compute_bucket_assignment_by_size(
        params, {static_cast<size_t>(first_cap), static_cast<size_t>(cap)}, std::vector<bool>(params.size(), false));
    std::reverse(buckets.begin(), buckets.end());
    std::vector<int64_t> caps(limits.rbegin(), limits.rend());
    for (const auto& bucket : buckets) {
      int64_t bytes = 0;
      for (size_t i : bucket) bytes += params[i].numel() * static_cast<int64_t>(params[i].element_size());
      bucket_bytes_.push_back(bytes);
    }
    if (!overlap) {
      // Same buckets, reduced by after_backward(); the reducer's first-step re-ordering by
      // gradient arrival does not apply (nothing arrives early when nothing overlaps).
      params_ = std::move(params);
      buckets_ = std::move(buckets);
      return;
    }
    reducer_ = std::make_unique<c10d::Reducer>(
        params, std::move(buckets), dist.group(), std::vector<bool>(params.size(), false), cap,
        dist.options().find_unused_parameters, /*gradient_as_bucket_view=*/false, std::move(names), first_cap,
        /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false, std::move(caps));
  } catch (const tp::Error&) {
    throw;
  } catch (const std::exception& e) {
    dist.fail("set up gradient buckets (parameter shapes must match on all ranks)", e);
  }
}

GradSync::~GradSync() = default;

void GradSync::before_forward(bool sync) {
  if (!reducer_) return;
  // Once per run, after the first synchronised backward: a broadcast of the new bucket order.
  reducer_->rebuild_buckets();
  if (sync) reducer_->prepare_for_forward();
}

void GradSync::before_backward(const at::Tensor& loss, bool sync) {
  // Arming the reducer is what makes backward communicate; skipping it is no_sync. With
  // find_unused_parameters it walks the graph from the loss to mark parameters that get no
  // gradient (an extra traversal per step, which is why it is off by default).
  if (sync && reducer_) reducer_->prepare_for_backward({loss});
}

void GradSync::after_backward() {
  if (reducer_) return;
  c10::NoGradGuard no_grad;
  const double world = static_cast<double>(dist_.world_size());
  std::vector<at::Tensor> flats;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  try {
    // All buckets are launched before the first wait, as the reducer does, so the transport can
    // pipeline them; none of it overlaps backward, which has finished.
    for (const auto& bucket : buckets_) {
      std::vector<at::Tensor> pieces;
      for (size_t i : bucket) {
        const at::Tensor& g = params_[i].grad();
        pieces.push_back(g.defined() ? g.reshape({-1}) : at::zeros({params_[i].numel()}, params_[i].options()));
      }
      at::Tensor flat = at::cat(pieces);
      flat.div_(world); // averaged like the reducer: divide, then sum
      std::vector<at::Tensor> one{flat};
      works.push_back(dist_.group()->allreduce(one));
      flats.push_back(flat);
    }
    for (auto& work : works) work->wait();
  } catch (const std::exception& e) {
    dist_.fail("all-reduce of gradient buckets after backward (dist.overlap = false)", e);
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    int64_t offset = 0;
    for (size_t i : buckets_[b]) {
      at::Tensor& p = params_[i];
      const at::Tensor piece = flats[b].narrow(0, offset, p.numel()).view(p.sizes());
      offset += p.numel();
      if (p.grad().defined()) p.mutable_grad().copy_(piece);
      else p.mutable_grad() = piece.clone();
    }
  }
}

}  // namespace tp
