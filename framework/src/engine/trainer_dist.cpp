// The trainer's data-parallel pieces (docs/distributed.md). Every function here is a no-op or
// the identity for a single process (dist_ == nullptr), so that path creates no process group
// and does no extra work. Under data-parallel training each is collective: all ranks call it at
// the same point of the run, which is what keeps decisions identical and no rank waiting alone.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <csignal>
#include <utility>

#include "tp/framework/dist/dist_context.h"
#include "tp/framework/dist/grad_sync.h"
#include "tp/framework/engine/stop_signal.h"
#include "tp/framework/engine/trainer.h"
#include "tp/framework/error.h"

namespace tp {

void Trainer::init_dist() {
  if (!dist_) return;
  broadcast_model(); // same initial weights everywhere, whatever each rank's init drew
  const bool overlap = config_.dist.overlap;
  grad_sync_ = std::make_unique<GradSync>(*dist_, model_state_, overlap);
  std::string sizes;
  for (int64_t bytes : grad_sync_->bucket_bytes()) sizes += (sizes.empty() ? "" : ", ") + std::to_string(bytes >> 10);
  log_.info("data-parallel: " + std::to_string(world_size_) + " ranks, backend " + dist_->backend() + ", " +
            std::to_string(grad_sync_->bucket_bytes().size()) + " gradient buckets (KiB, in reduction order: " + sizes +
            (overlap ? "" : "; reduced after backward, dist.overlap = false") + "); batch " +
            std::to_string(config_.train.batch_size) + " per rank = " +
            std::to_string(config_.train.batch_size * world_size_ * config_.train.grad_accum_steps) +
            " samples per optimizer step");
}

void Trainer::broadcast_model() {
  if (!dist_) return;
  std::vector<at::Tensor> tensors;
  for (const auto& s : model_state_) tensors.push_back(s.tensor.detach());
  c10::NoGradGuard no_grad;
  dist_->broadcast(tensors, "broadcast rank 0's parameters and buffers");
}

uint32_t Trainer::agree(uint32_t requests) {
  if (!dist_) return requests;
  // Sum of per-rank flags > 0 means "some rank asked": stop and save are ORed.
  at::Tensor flags = at::tensor({double((requests & TP_REQUEST_STOP) != 0), double((requests & TP_REQUEST_SAVE) != 0)},
                                at::TensorOptions().dtype(at::kDouble)).to(device_);
  std::vector<at::Tensor> one{flags};
  dist_->all_reduce_sum(one, "agree on callback stop/save requests");
  const at::Tensor host = flags.cpu();
  uint32_t agreed = requests;
  if (host[0].item<double>() > 0) agreed |= TP_REQUEST_STOP;
  if (host[1].item<double>() > 0) agreed |= TP_REQUEST_SAVE;
  return agreed;
}

at::Tensor Trainer::agree_on_window() {
  const uint32_t deferred = std::exchange(pending_requests_, TP_REQUEST_NONE);
  if (!dist_) {
    window_requests_ = deferred;
    window_empty_ = window_batches_ == 0;
    return {};
  }
  // With dist.overlap = false the gradient buckets are all-reduced here, after backward.
  grad_sync_->after_backward();
  // One all-reduce of [items, non-finite loss seen, stop signal seen, deferred stop, deferred
  // save]. The values are read on the host, so on CUDA this is a sync point once per optimizer
  // step; the deferred callback requests ride along instead of costing an all-reduce of their own.
  const int local_signal = pending_stop_signal();
  const auto flag = [&](bool on) { return at::full({}, on ? 1.0 : 0.0, window_items_.options()); };
  at::Tensor values = at::stack({window_items_, flag(window_poisoned_), flag(local_signal != 0),
                                 flag((deferred & TP_REQUEST_STOP) != 0), flag((deferred & TP_REQUEST_SAVE) != 0)});
  std::vector<at::Tensor> one{values};
  dist_->all_reduce_sum(one, "agree on the window's item count and stop flags");
  const at::Tensor host = values.cpu();
  const bool poisoned = host[1].item<double>() > 0;
  if (host[2].item<double>() > 0) agreed_signal_ = local_signal != 0 ? local_signal : SIGTERM;
  window_requests_ = (host[3].item<double>() > 0 ? TP_REQUEST_STOP : 0u) | (host[4].item<double>() > 0 ? TP_REQUEST_SAVE : 0u);
  if (poisoned && config_.train.nan_policy == "stop")
    throw Error("the training loss became non-finite on at least one rank at step " + std::to_string(step_ + 1) +
                " (epoch " + std::to_string(epoch_ + 1) + "); every rank stops. Lower optim.lr, check the data for "
                "NaN/Inf, clip gradients (train.max_grad_norm), or set train.nan_policy = \"skip\".");
  window_poisoned_ = poisoned;
  // No item on any rank (every sample of the window skipped): the gradients are the zeros the
  // empty micro-batches contributed, and the step is taken as skipped (optimizer_step).
  window_empty_ = host[0].item<double>() == 0.0;
  // Gradients arrive averaged over ranks, each divided by the shared estimate: multiplying by
  // estimate x world / global items makes them the gradient of (global loss sum / global items).
  return window_estimate_ * static_cast<double>(world_size_) / values[0];
}

std::pair<double, double> Trainer::global_sums(const at::Tensor& sum, const at::Tensor& count) {
  if (!dist_) return {sum.item<double>(), count.item<double>()};
  std::vector<at::Tensor> one{at::stack({sum, count})};
  dist_->all_reduce_sum(one, "sum the training loss over ranks");
  const at::Tensor host = one[0].cpu();
  return {host[0].item<double>(), host[1].item<double>()};
}

void Trainer::gather_running_loss() {
  if (!dist_) return;
  std::vector<at::Tensor> one{at::stack({epoch_loss_sum_, epoch_count_, window_loss_sum_, window_count_})};
  dist_->all_reduce_sum(one, "gather the running loss for a checkpoint");
  const at::Tensor totals = one[0];
  int i = 0;
  for (auto* t : {&epoch_loss_sum_, &epoch_count_, &window_loss_sum_, &window_count_}) {
    if (rank_ == 0) t->copy_(totals[i]);
    else t->zero_();
    ++i;
  }
}

void Trainer::reduce_eval(at::Tensor& loss_sum, at::Tensor& count) {
  if (!dist_) return;
  // Exact evaluation: the shards are disjoint and cover the split once, so sums of the loss,
  // the item count and every metric's state are the single-process values.
  std::vector<at::Tensor> tensors{loss_sum, count};
  for (auto& metric : parts_.metrics)
    for (const auto& s : metric->state()) tensors.push_back(s.tensor);
  dist_->all_reduce_sum(tensors, "sum evaluation loss and metric state over ranks");
}

void Trainer::sync_buffers() {
  if (!dist_ || !config_.dist.broadcast_buffers) return;
  std::vector<at::Tensor> buffers;
  for (const auto& s : model_state_)
    if (s.is_buffer) buffers.push_back(s.tensor.detach());
  if (buffers.empty()) return;
  c10::NoGradGuard no_grad;
  dist_->broadcast(buffers, "broadcast rank 0's buffers");
}

void Trainer::check_same_position() {
  if (!dist_) return;
  const at::Tensor mine = at::tensor({step_, start_epoch_, start_batch_}, at::TensorOptions().dtype(at::kLong));
  const at::Tensor root = mine.to(device_);
  dist_->broadcast({root}, "compare resume positions");
  if (!at::equal(root.cpu(), mine))
    throw ConfigError("", "rank " + std::to_string(rank_) + " starts at step " + std::to_string(step_) +
                              " but rank 0 at step " + std::to_string(root.cpu()[0].item<int64_t>()) +
                              ": the ranks did not load the same checkpoint. With --resume every rank must see the "
                              "same run directory (a shared file system on several nodes), and the world size "
                              "must be the one the checkpoint was written with.");
}

}  // namespace tp
