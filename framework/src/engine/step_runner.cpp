// The hot path: one micro-batch in numbered phases (ARCH-15), and the update that ends
// its accumulation window.
#include "tp/framework/engine/step_runner.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <csignal>
#include <optional>
#include <string_view>
#include <utility>

#include "tp/framework/amp/autocast_guard.h"
#include "tp/framework/dist/batchnorm_sync.h"
#include "tp/framework/dist/dist_context.h"
#include "tp/framework/dist/grad_sync.h"
#include "tp/framework/data/collate.h"
#include "tp/framework/engine/batch_transforms.h"
#include "tp/framework/engine/out_of_memory.h"
#include "tp/framework/engine/stop_signal.h"
#include "tp/framework/error.h"
#include "tp/framework/profile/flop_counter.h"
#include "tp/framework/profile/memory.h"

namespace tp {
namespace {

// Times a phase of the step and ends it also when the phase throws, so an out-of-memory retry
// leaves no started phase behind (on CUDA an unrecorded end event).
class PhaseTiming {
 public:
  PhaseTiming(TrainingReport& report, StepPhase phase) : report_(report), phase_(phase) { report_.begin(phase_); }
  ~PhaseTiming() { report_.end(phase_); }
  PhaseTiming(const PhaseTiming&) = delete;
  PhaseTiming& operator=(const PhaseTiming&) = delete;

 private:
  TrainingReport& report_;
  StepPhase phase_;
};

}  // namespace

StepRunner::StepRunner(const RunConfig& config, RunComponents& parts, const std::vector<StateTensor>& model_state,
                       BuiltOptimizer& optim, const BatchPlacement& placement, TrainMeters& meters, Logger& log,
                       DistContext* dist)
    : config_(config),
      parts_(parts),
      model_state_(model_state),
      optim_(optim),
      placement_(placement),
      meters_(meters),
      log_(log),
      dist_(dist),
      precision_(config.amp.precision),
      scaler_(GradScalerOptions()
                  .init_scale(config.amp.init_scale)
                  .growth_factor(config.amp.growth_factor)
                  .backoff_factor(config.amp.backoff_factor)
                  .growth_interval(config.amp.growth_interval)
                  .enabled(needs_grad_scaler(precision_))),
      nan_checks_(nan_checks(precision_, placement.device().type(), config.train.nan_policy)) {
  const auto zero = [&] { return at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(placement.device())); };
  window_estimate_ = zero();
  window_items_ = zero();
}

StepRunner::~StepRunner() = default;

void StepRunner::start_data_parallel() {
  const bool overlap = config_.dist.overlap;
  grad_sync_ = std::make_unique<GradSync>(*dist_, model_state_, overlap);
  std::string sizes;
  for (int64_t bytes : grad_sync_->bucket_bytes()) sizes += (sizes.empty() ? "" : ", ") + std::to_string(bytes >> 10);
  const int64_t world = dist_->world_size();
  log_.info("data-parallel: " + std::to_string(world) + " ranks, backend " + dist_->backend() + ", " +
            std::to_string(grad_sync_->bucket_bytes().size()) + " gradient buckets (KiB, in reduction order: " + sizes +
            (overlap ? "" : "; reduced after backward, dist.overlap = false") + "); batch " +
            std::to_string(config_.train.batch_size) + " per rank = " +
            std::to_string(config_.train.batch_size * world * config_.train.grad_accum_steps) +
            " samples per optimizer step");
}

WindowAgreement StepRunner::train_step(NamedTensors& cpu_batch, const AccumulationWindow& window,
                                       const StepPosition& at, uint32_t deferred) {
  TrainingReport& report = meters_.report();
  begin_micro_batch(window, at.step);
  if (!cpu_batch.empty()) {
    // 1. Fetch: the loader already collated this batch on a worker; place it on the device
    //    (non_blocking from pinned memory on CUDA, a no-op on CPU), then run the training batch
    //    transforms in order (mixup, cutmix: device work, seeded by the batch's position; at.batch
    //    is the index of the batch after this one).
    const NamedTensors batch = apply_batch_transforms(
        parts_.batch_transforms, placement_.to_device(std::move(cpu_batch)),
        {static_cast<uint64_t>(config_.run.seed), dist_ ? dist_->rank() : 0, static_cast<uint64_t>(at.epoch),
         static_cast<uint64_t>(at.batch - 1)});
    // 2-3. Forward and backward, piece by piece: one piece, the whole batch, unless
    //      train.on_oom = "split" cut micro-batches after an out-of-memory error.
    train_pieces(batch, window, at);
  } else if (grad_sync_ && window.last) {
    // Every sample skipped (data.on_bad_sample = "skip"), but this backward is a collective.
    join_all_reduce(window);
  }
  if (!window.last) return {};
  // 4. Update, once per window: agree with the other ranks, then step unless nothing to apply.
  report.begin(StepPhase::kOptimizer);
  const WindowAgreement agreed = agree_on_window(deferred, at);
  const bool poisoned = std::exchange(window_poisoned_, false);
  if (poisoned || window_empty_) {
    // nan_policy = "skip", or no item in the window on any rank: no update, but time advances
    // like a step the fp16 scaler skips, so the schedule and the step count stay aligned.
    optim_.optimizer->zero_grad(/*set_to_none=*/true);
    if (poisoned) ++skipped_steps_;
  } else {
    try {
      update();
    } catch (...) {
      // Optimizer state is allocated at the first step: smaller micro-batches would not shrink it.
      if (!is_out_of_memory(std::current_exception())) throw;
      const OutOfMemorySite site{"optimizer step", 0, at.step + 1, at.epoch + 1, config_.train.batch_size,
                                 config_.train.grad_accum_steps, splits_};
      throw Error(out_of_memory_report(site, placement_.device(),
                                       config_.train.on_oom == "split" ? "smaller micro-batches do not shrink the "
                                                                         "gradients and the optimizer's state" : "",
                                       std::current_exception()));
    }
  }
  report.end(StepPhase::kOptimizer);
  return agreed;
}

void StepRunner::begin_micro_batch(const AccumulationWindow& window, int64_t step) {
  // Phase timing (training_report.h): every step on CPU; on CUDA only the log step's window,
  // with device events and no extra sync.
  if (window.first) {
    log_window_ = (step + 1) % config_.train.log_every_steps == 0;
    meters_.report().begin_window(log_window_);
  }
  // Data-parallel: the reducer is told whether this backward communicates (window.last). Every
  // micro-batch, empty or not, so every rank makes the reducer's collectives in the same order.
  if (grad_sync_) grad_sync_->before_forward(window.last);
  if (!window.first) return;
  if (grad_sync_) sync_buffers();
  window_items_.zero_();
  window_batches_ = 0;
  window_backwards_ = 0;
  split_this_window_ = false;
}

void StepRunner::train_pieces(const NamedTensors& batch, const AccumulationWindow& window, const StepPosition& at) {
  const int64_t rows = batch.front().second.size(0);
  int64_t done = 0;
  while (done < rows) {
    // After a split the rest of the batch is cut with the new piece size (ceil: rows / splits_).
    const int64_t count = std::min(rows - done, (rows + splits_ - 1) / splits_);
    const bool sync = window.last && done + count == rows; // only the micro-batch's last backward all-reduces
    try {
      train_piece(count == rows ? batch : batch_rows(batch, done, count), window, sync, at);
    } catch (...) {
      recover_from_out_of_memory(std::current_exception(), count, sync, at);
      continue; // the same rows again, in smaller pieces
    }
    done += count;
  }
}

void StepRunner::train_piece(const NamedTensors& piece, const AccumulationWindow& window, bool sync,
                             const StepPosition& at) {
  // 2. Forward under autocast, then the window-normalised loss and the non-finite check.
  piece_phase_ = "forward";
  const LossTerms terms = forward(piece);
  const at::Tensor loss = normalised_loss(terms, window);
  const at::Tensor sum = terms.sum.detach().to(at::kDouble);
  check_finite(sum, at);
  // 3. Backward through the (fp16: scaled) loss; gradients accumulate over the window.
  piece_phase_ = "backward";
  {
    PhaseTiming timing(meters_.report(), StepPhase::kBackward);
    backward(loss, sync);
  }
  // Counted once the piece is in the gradients (a piece retried after running out of memory is not).
  const at::Tensor items = terms.count.detach().to(at::kDouble);
  window_items_.add_(items);
  ++window_backwards_;
  // Report: accumulate on the device; the value is read only on log steps (a device sync).
  if (!window_poisoned_) meters_.add_loss(sum, items, terms.terms);
}

void StepRunner::recover_from_out_of_memory(const std::exception_ptr& error, int64_t samples, bool sync,
                                            const StepPosition& at) {
  if (!is_out_of_memory(error)) std::rethrow_exception(error);
  const bool in_backward = std::string_view(piece_phase_) == "backward";
  // A backward that failed half-way has added part of its gradient: undoable only while the
  // window's gradients hold nothing else (they are none at a window's start), and never where the
  // other ranks are already all-reducing buckets of it.
  std::string why_not;
  if (samples <= 1) why_not = "a single sample does not fit";
  else if (in_backward && window_backwards_ > 0)
    why_not = "it came in a backward after earlier pieces of this accumulation window had added to the gradients, "
              "which cannot be taken back";
  else if (in_backward && sync && grad_sync_ && grad_sync_->overlap())
    why_not = "it came in the backward that all-reduces gradient buckets with the other ranks as they fill";
  const OutOfMemorySite site{piece_phase_, samples, at.step + 1, at.epoch + 1, config_.train.batch_size,
                             config_.train.grad_accum_steps, splits_};
  if (config_.train.on_oom != "split" || !why_not.empty())
    throw Error(out_of_memory_report(site, placement_.device(), config_.train.on_oom == "split" ? why_not : "", error));
  // The failed piece's tensors were freed as the error unwound; the gradients it wrote partly go
  // too, and the allocator's cache returns to the device so the halves start unfragmented.
  if (in_backward) optim_.optimizer->zero_grad(/*set_to_none=*/true);
  release_cached_memory(placement_.device());
  splits_ *= 2;
  split_this_window_ = true;
  const int64_t piece = (config_.train.batch_size + splits_ - 1) / splits_;
  const std::string rank = dist_ ? ", rank " + std::to_string(dist_->rank()) : "";
  log_.warn("out of memory in the " + std::string(piece_phase_) + " of " + std::to_string(samples) +
            " samples at step " + std::to_string(at.step + 1) + " (epoch " + std::to_string(at.epoch + 1) + rank +
            "); train.on_oom = \"split\": micro-batches are cut in " + std::to_string(splits_) + " pieces of at most " +
            std::to_string(piece) + " samples from here on, and each optimizer step still averages the same " +
            std::to_string(config_.train.batch_size * config_.train.grad_accum_steps) + " samples per rank");
}

void StepRunner::set_micro_batch_splits(int64_t splits) {
  TP_CHECK(splits >= 1, "micro-batch splits must be >= 1, got ", splits);
  splits_ = splits;
}

LossTerms StepRunner::forward(const NamedTensors& batch) {
  TrainingReport& report = meters_.report();
  PhaseTiming timing(report, StepPhase::kForward);
  AutocastGuard autocast(placement_.device().type(), precision_);
  // Once, on the run's first batch: the model's forward FLOPs, for perf/tflops. The counter only
  // reads the ops' records (a few microseconds per op, this step only).
  std::optional<FlopCounter> flops;
  if (!report.flops_measured()) flops.emplace();
  const NamedTensors outputs = parts_.model->forward(batch);
  if (flops) report.set_forward_flops(flops->total_flops(), batch.empty() ? 0 : batch.front().second.size(0));
  flops.reset();
  return parts_.loss->forward(outputs, batch);
}

at::Tensor StepRunner::normalised_loss(const LossTerms& terms, const AccumulationWindow& window) {
  const at::Tensor items = terms.count.detach().to(at::kDouble);
  // The window's loss is (sum over all its items) / (its item count), which is only known at
  // the window's end. Divide by an estimate now (the window's first non-empty micro-batch's
  // count x window length) and correct the gradients by estimate / actual once the window is
  // complete (update): exact for uneven micro-batches and the short last window, and no extra
  // device sync. Data-parallel: the estimate must be the same on every rank (gradients are
  // summed before the correction), so it is the nominal batch size x window length. A micro-batch
  // cut in pieces (train.on_oom) counts as that many micro-batches.
  if (window_batches_++ == 0) {
    if (dist_) window_estimate_.fill_(static_cast<double>(config_.train.batch_size * window.length));
    else window_estimate_.copy_(items * static_cast<double>(window.length * splits_));
  }
  return terms.sum.to(at::kFloat) / window_estimate_.to(at::kFloat);
}

void StepRunner::check_finite(const at::Tensor& sum, const StepPosition& at) {
  // Where that is free or needed (nan_policy.h); otherwise at the host's next read of the loss.
  if (!nan_checks_.per_step || std::isfinite(sum.item<double>())) return;
  const std::string where = "at step " + std::to_string(at.step + 1) + " (epoch " + std::to_string(at.epoch + 1) +
                            ", batch " + std::to_string(at.batch) + ", lr " +
                            std::to_string(current_lr(*optim_.optimizer)) + ")";
  // Data-parallel: backward must still run (it is a collective); the ranks decide together at
  // the window's end (agree_on_window) and stop or skip as one.
  if (config_.train.nan_policy == "stop" && !dist_)
    throw Error("the training loss became non-finite " + where +
                ". Lower optim.lr, check the data for NaN/Inf, clip gradients (train.max_grad_norm), or set "
                "train.nan_policy = \"skip\" to skip such steps.");
  if (!window_poisoned_) log_.warn("non-finite training loss " + where + ": skipping this optimizer step");
  window_poisoned_ = true;
}

void StepRunner::backward(const at::Tensor& loss, bool sync) {
  // Data-parallel, the window's last backward (`sync`): buckets are all-reduced as they fill,
  // overlapping the rest of backward; earlier ones accumulate locally with no communication.
  if (grad_sync_) grad_sync_->before_backward(loss, sync);
  if (grad_sync_ && sync) {
    try {
      scaler_.scale(loss).backward();
    } catch (const std::exception& e) {
      // The reducer waits for its bucket all-reduces at the end of backward; a lost rank
      // surfaces here as a transport error. fail() names the ranks that no longer answer.
      dist_->fail("all-reduce of gradient buckets during backward", e);
    }
  } else if (!window_poisoned_ || grad_sync_) {
    scaler_.scale(loss).backward();
  }
}

void StepRunner::join_all_reduce(const AccumulationWindow& window) {
  // A zero loss that reaches every trainable parameter: this rank contributes zero gradient and
  // zero items to the window's all-reduce, which the other ranks are waiting in.
  at::Tensor zero = at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(placement_.device()));
  for (const auto& s : model_state_)
    if (!s.is_buffer && s.tensor.requires_grad()) zero = zero + s.tensor.sum().to(at::kFloat) * 0.0;
  PhaseTiming timing(meters_.report(), StepPhase::kBackward);
  backward(zero, window.last);
}

WindowAgreement StepRunner::agree_on_window(uint32_t deferred, const StepPosition& at) {
  correction_ = at::Tensor();
  if (!dist_) {
    window_empty_ = window_batches_ == 0;
    return {deferred, 0};
  }
  // With dist.overlap = false the gradient buckets are all-reduced here, after backward.
  grad_sync_->after_backward();
  // One all-reduce of [items, non-finite loss seen, stop signal seen, deferred stop, deferred
  // save, time budget used up]. The values are read on the host, so on CUDA this is a sync point once per optimizer
  // step; the deferred callback requests ride along instead of costing an all-reduce of their own.
  const int local_signal = pending_stop_signal();
  const auto flag = [&](bool on) { return at::full({}, on ? 1.0 : 0.0, window_items_.options()); };
  at::Tensor values = at::stack({window_items_, flag(window_poisoned_), flag(local_signal != 0),
                                 flag((deferred & TP_REQUEST_STOP) != 0), flag((deferred & TP_REQUEST_SAVE) != 0),
                                 flag((deferred & kRequestBudgetStop) != 0), flag(split_this_window_)});
  std::vector<at::Tensor> one{values};
  dist_->all_reduce_sum(one, "agree on the window's item count and stop flags");
  const at::Tensor host = values.cpu();
  WindowAgreement agreed;
  if (host[2].item<double>() > 0) agreed.signal = local_signal != 0 ? local_signal : SIGTERM;
  if (host[3].item<double>() > 0) agreed.requests |= TP_REQUEST_STOP;
  if (host[4].item<double>() > 0) agreed.requests |= TP_REQUEST_SAVE;
  if (host[5].item<double>() > 0) agreed.requests |= kRequestBudgetStop;
  const bool poisoned = host[1].item<double>() > 0;
  if (poisoned && config_.train.nan_policy == "stop")
    throw Error("the training loss became non-finite on at least one rank at step " + std::to_string(at.step + 1) +
                " (epoch " + std::to_string(at.epoch + 1) + "); every rank stops. Lower optim.lr, check the data for "
                "NaN/Inf, clip gradients (train.max_grad_norm), or set train.nan_policy = \"skip\".");
  window_poisoned_ = poisoned;
  if (host[6].item<double>() > 0) agree_on_splits();
  // No item on any rank (every sample of the window skipped): the gradients are the zeros the
  // empty micro-batches contributed, and the window takes no update.
  window_empty_ = host[0].item<double>() == 0.0;
  // Gradients arrive averaged over ranks, each divided by the shared estimate: multiplying by
  // estimate x world / global items makes them the gradient of (global loss sum / global items).
  correction_ = window_estimate_ * static_cast<double>(dist_->world_size()) / values[0];
  return agreed;
}

void StepRunner::agree_on_splits() {
  // Rare (after an out-of-memory split on some rank), so a collective of its own: every rank
  // takes the largest split, so all ranks cut alike and the checkpoint records what fits everywhere.
  const at::Tensor mine = at::full({1}, static_cast<double>(splits_), window_items_.options());
  int64_t largest = splits_;
  std::string ranks;
  const std::vector<at::Tensor> all = dist_->all_gather(mine, "agree on the micro-batch split after out of memory");
  for (std::size_t r = 0; r < all.size(); ++r) {
    const auto splits = static_cast<int64_t>(all[r].cpu().item<double>());
    largest = std::max(largest, splits);
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(r) + ": " + std::to_string(splits);
  }
  log_.info("micro-batch pieces per rank after out of memory (" + ranks + "): every rank cuts in " +
              std::to_string(largest) + " from the next step");
  splits_ = largest;
}

void StepRunner::update() {
  // torch::nn::utils::clip_grad_* take the parameters (they clip each one's .grad()), the
  // foreach correction below takes the gradients themselves.
  std::vector<at::Tensor> params, grads;
  for (const auto& group : optim_.optimizer->param_groups())
    for (const auto& p : group.params())
      if (p.grad().defined()) {
        params.push_back(p);
        grads.push_back(p.grad());
      }
  // 4a. Exact window normalisation (see normalised_loss); the ratio is 1 when micro-batches are even.
  if (correction_.defined() && !grads.empty())
    at::_foreach_mul_(grads, correction_.to(grads.front().scalar_type()));
  else if (config_.train.grad_accum_steps * splits_ > 1 && !grads.empty())
    at::_foreach_mul_(grads, (window_estimate_ / window_items_).to(grads.front().scalar_type()));
  // 4b. Clip once, after unscaling, right before the step (ARCH-9); the norm is also measured on
  //     a logging step's window for train/grad_norm.
  const TrainSection& t = config_.train;
  if (t.max_grad_norm > 0 || t.clip_value > 0 || log_window_) {
    scaler_.unscale(*optim_.optimizer);
    if ((t.max_grad_norm > 0 || log_window_) && !grads.empty()) clip_by_norm(grads);
    if (t.clip_value > 0) torch::nn::utils::clip_grad_value_(params, t.clip_value);
  }
  // 4c. Step (the fp16 scaler skips it on inf/NaN gradients and backs off), then set gradients
  //     to none (frees them, skips a memset); the caller advances the schedule.
  if (!scaler_.step(*optim_.optimizer)) ++scaler_skipped_;
  scaler_.update();
  optim_.optimizer->zero_grad(/*set_to_none=*/true);
}

void StepRunner::clip_by_norm(const std::vector<at::Tensor>& grads) {
  // torch.nn.utils.clip_grad_norm_ (foreach): the norm of the per-tensor norms, then one
  // clamped coefficient for every gradient. Unlike LibTorch's clip_grad_norm_ it returns no
  // double, so CUDA runs do not wait for the device here every step.
  const double norm_type = config_.train.grad_norm_type;
  std::vector<at::Tensor> norms = at::_foreach_norm(grads, norm_type);
  for (auto& n : norms) n = n.to(grads.front().device(), at::kFloat);
  grad_norm_ = at::linalg_vector_norm(at::stack(norms), norm_type);
  const double max_norm = config_.train.max_grad_norm;
  if (max_norm <= 0) return;
  const at::Tensor coefficient = (max_norm / (grad_norm_ + 1e-6)).clamp_max(1.0);
  at::_foreach_mul_(grads, coefficient);
  const at::Tensor clipped = (grad_norm_ > max_norm).to(at::kDouble);
  clipped_steps_ = clipped_steps_.defined() ? clipped_steps_ + clipped : clipped;
  ++clip_checked_steps_;
}

StepRunner::UpdateStats StepRunner::read_update_stats() {
  UpdateStats stats;
  if (grad_norm_.defined()) stats.grad_norm = grad_norm_.item<double>(); // sync, at log steps only
  if (clipped_steps_.defined() && clip_checked_steps_ > 0)
    stats.clipped_fraction = clipped_steps_.item<double>() / static_cast<double>(clip_checked_steps_);
  if (scaler_.is_enabled()) stats.scale = scaler_.get_scale();
  stats.scaler_skipped = scaler_skipped_;
  grad_norm_ = at::Tensor();
  clipped_steps_ = at::Tensor();
  clip_checked_steps_ = 0;
  return stats;
}

void StepRunner::check_read_loss(double sum, const std::string& span) const {
  if (read_check_fails(sum))
    throw Error("the training loss became non-finite " + span +
                ". Lower optim.lr, check the data for NaN/Inf, or clip gradients (train.max_grad_norm).");
}

bool StepRunner::read_check_fails(double sum) const { return nan_checks_.at_read && !std::isfinite(sum); }

void StepRunner::sync_buffers() {
  if (!config_.dist.broadcast_buffers) return;
  // dist.bn_stats = "reduce": each rank keeps its own running statistics between evaluations
  // and saves, where the trainer averages them (batchnorm_sync.h); other buffers are rank 0's.
  const bool keep_statistics = config_.dist.bn_stats == "reduce";
  std::vector<at::Tensor> buffers;
  for (const auto& s : model_state_)
    if (s.is_buffer && !(keep_statistics && is_batchnorm_statistic(s.name))) buffers.push_back(s.tensor.detach());
  if (buffers.empty()) return;
  c10::NoGradGuard no_grad;
  dist_->broadcast(buffers, "broadcast rank 0's buffers");
}

}  // namespace tp
