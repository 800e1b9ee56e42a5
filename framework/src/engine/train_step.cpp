// The hot path: one training epoch, one micro-batch, one optimizer step. Kept apart from the
// rest of the trainer so the step reads top to bottom in numbered phases (house style 1.7).
#include <ATen/ATen.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "tp/framework/amp/autocast_guard.h"
#include "tp/framework/dist/dist_context.h"
#include "tp/framework/dist/grad_sync.h"
#include "tp/framework/engine/stop_signal.h"
#include "tp/framework/engine/trainer.h"
#include "tp/framework/error.h"
#include "tp/framework/profile/flop_counter.h"

namespace tp {

void Trainer::train_epoch(int64_t epoch) {
  parts_.model->set_training(true);
  // A resumed run starts inside its first epoch; checkpoints are written at window boundaries.
  int64_t done = std::exchange(start_batch_, 0);
  train_loader_->start_epoch(static_cast<uint64_t>(epoch), done);
  const int64_t batches = train_batches_;
  const int64_t accum = config_.train.grad_accum_steps;
  progress_.start_epoch(epoch, epochs_, batches);
  defer(dispatch(TP_EVENT_EPOCH_BEGIN, {}));
  epoch_start_ = window_start_ = std::chrono::steady_clock::now();
  epoch_wait_s_ = window_wait_s_ = 0.0;
  epoch_samples_ = window_samples_ = window_steps_ = 0;
  while (done < batches) {
    auto batch = train_loader_->next();
    if (!batch) break;
    const double wait = train_loader_->last_wait_seconds();
    const int64_t samples = batch->empty() ? 0 : batch->front().second.size(0);
    window_wait_s_ += wait;
    epoch_wait_s_ += wait;
    progress_.add_data_wait(wait);
    window_samples_ += samples;
    epoch_samples_ += samples;
    report_.add_batch(wait, samples);
    const int64_t window_start = (done / accum) * accum;
    const Window window{std::min(accum, batches - window_start), done == window_start,
                        done + 1 == std::min(window_start + accum, batches)};
    if (window.first) defer(dispatch(TP_EVENT_STEP_BEGIN, {}));
    train_step(*batch, window);
    ++done;
    if (window.last) after_optimizer_step(epoch, done);
    // Data-parallel: the signal some rank saw, agreed at this window's end, so all stop together.
    if (const int signal_number = dist_ ? agreed_signal_ : pending_stop_signal(); signal_number != 0 && window.last) {
      // Finish the step, save exactly here, and leave: --resume continues from this batch.
      save_position(epoch, train_loader_->next_batch_index());
      throw Interrupted(signal_number, "stopped by signal " + std::to_string(signal_number) + " at step " +
                                           std::to_string(step_) + "; saved " +
                                           (run_dir_ / "checkpoints" / "last.pt").string() +
                                           ". Continue with --resume auto.");
    }
    if (stop_requested_ && window.last) break;
  }
}

void Trainer::after_optimizer_step(int64_t epoch, int64_t done) {
  ++window_steps_;
  // Requests deferred from FIT_BEGIN, EPOCH_BEGIN, STEP_BEGIN and CHECKPOINT_* events, agreed
  // over ranks in this window's all-reduce (agree_on_window).
  const uint32_t deferred = std::exchange(window_requests_, TP_REQUEST_NONE);
  if (deferred & TP_REQUEST_STOP) request_stop();
  if (deferred & TP_REQUEST_SAVE) save_position(epoch, train_loader_->next_batch_index());
  double loss = std::numeric_limits<double>::quiet_NaN();
  const double lr = current_lr(*optim_.optimizer);
  if (step_ % config_.train.log_every_steps == 0) {
    // Throughput meter: wall time includes the device work only because reading the loss below
    // synchronises, so per-step times are exact over a logging window, not per step.
    loss = read_window_loss();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - window_start_).count();
    const double steps = static_cast<double>(std::max<int64_t>(1, window_steps_));
    const double samples_per_s = wall > 0 ? double(window_samples_) / wall : 0.0;
    HistoryRecord record{"step",
                         {{"step", double(step_)},
                          {"epoch", double(epoch)},
                          {"lr", lr},
                          {"train/loss", loss},
                          {"time/step_s", wall / steps},
                          {"time/data_wait_s", window_wait_s_ / steps},
                          {"throughput/samples_per_s", samples_per_s}}};
    // The step split, peak memory and TFLOP/s (after read_window_loss: on CUDA its sync has
    // completed the phase events).
    for (auto& value : report_.log_values(samples_per_s)) record.values.push_back(std::move(value));
    // LR monitor: every parameter group's lr when they differ ([[optim.param_groups]]).
    const auto& groups = optim_.optimizer->param_groups();
    bool differ = false;
    for (const auto& group : groups) differ |= group.options().get_lr() != lr;
    for (std::size_t i = 0; differ && i < groups.size(); ++i)
      record.values.emplace_back("lr/group" + std::to_string(i), groups[i].options().get_lr());
    history_.add(std::move(record));
    window_start_ = std::chrono::steady_clock::now();
    window_wait_s_ = 0.0;
    window_samples_ = window_steps_ = 0;
    const uint32_t requests = agree(dispatch(TP_EVENT_STEP_END, {{"train/loss", loss}, {"lr", lr}}));
    if (requests & TP_REQUEST_STOP) request_stop();
    if (requests & TP_REQUEST_SAVE) save_position(epoch, train_loader_->next_batch_index());
  }
  progress_.update(done, loss, lr);
  // Step strategies: evaluate, then save (so the save can be the best one).
  if (val_loader_ && due(config_.eval.strategy, config_.eval.every, false, epoch)) {
    run_evaluation();
    draw_plots();
  }
  const bool periodic = due(config_.checkpoint.strategy, config_.checkpoint.every, false, epoch);
  if (periodic || last_eval_step_ == step_) save(periodic, epoch, train_loader_->next_batch_index());
  if (std::exchange(save_requested_, false)) save_position(epoch, train_loader_->next_batch_index());
}

void Trainer::train_step(NamedTensors& cpu_batch, const Window& window) {
  // Phase timing (training_report.h): every step on CPU; on CUDA only the log step's window,
  // with device events and no extra sync.
  if (window.first) report_.begin_window((step_ + 1) % config_.train.log_every_steps == 0);
  // Data-parallel: the reducer is told whether this backward communicates (window.last). Every
  // micro-batch, empty or not, so every rank makes the reducer's collectives in the same order.
  if (grad_sync_) grad_sync_->before_forward(window.last);
  if (grad_sync_ && window.first) sync_buffers();
  if (window.first) {
    window_items_.zero_();
    window_batches_ = 0;
  }
  if (!cpu_batch.empty()) {
    forward_backward(cpu_batch, window);
  } else if (grad_sync_ && window.last) {
    // Every sample of this micro-batch was skipped (data.on_bad_sample = "skip"), but the
    // window's last backward is a collective: join it with a zero loss that reaches every
    // trainable parameter, contributing zero gradient and zero items.
    at::Tensor zero = at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(device_));
    for (const auto& s : model_state_)
      if (!s.is_buffer && s.tensor.requires_grad()) zero = zero + s.tensor.sum().to(at::kFloat) * 0.0;
    report_.begin(StepPhase::kBackward);
    backward(zero, window);
    report_.end(StepPhase::kBackward);
  }

  // 4. Update, once per window.
  if (window.last) {
    report_.begin(StepPhase::kOptimizer);
    optimizer_step();
    report_.end(StepPhase::kOptimizer);
  }
}

void Trainer::forward_backward(NamedTensors& cpu_batch, const Window& window) {
  // 1. Fetch: the loader already collated this batch on a worker; copy it to the device
  //    (non_blocking from pinned memory on CUDA, a no-op on CPU).
  const NamedTensors batch = to_device(std::move(cpu_batch));

  // 2. Forward under autocast (a no-op for fp32): model on every field, then the loss, which
  //    returns (sum of item losses, number of items).
  NamedTensors outputs;
  LossTerms terms;
  report_.begin(StepPhase::kForward);
  {
    AutocastGuard autocast(device_.type(), precision_);
    // Once, on the run's first batch: the model's forward FLOPs, for perf/tflops. The counter
    // only reads the ops' records (a few microseconds per op, this step only).
    std::optional<FlopCounter> flops;
    if (!report_.flops_measured()) flops.emplace();
    outputs = parts_.model->forward(batch);
    if (flops) report_.set_forward_flops(flops->total_flops(), batch.empty() ? 0 : batch.front().second.size(0));
    flops.reset();
    terms = parts_.loss->forward(outputs, batch);
  }
  report_.end(StepPhase::kForward);
  const at::Tensor items = terms.count.detach().to(at::kDouble);
  // The window's loss is (sum over all its items) / (its item count), which is only known at
  // the window's end. Divide by an estimate now (the window's first non-empty micro-batch's
  // count x window length) and correct the gradients by estimate / actual once the window is
  // complete (step 4): exact for uneven micro-batches and the short last window, and no extra
  // device sync. Data-parallel: the estimate must be the same on every rank (gradients are
  // summed before the correction), so it is the nominal batch size x window length.
  if (window_batches_++ == 0) {
    if (dist_) window_estimate_.fill_(static_cast<double>(config_.train.batch_size * window.length));
    else window_estimate_.copy_(items * static_cast<double>(window.length));
  }
  window_items_.add_(items);
  const at::Tensor loss = terms.sum.to(at::kFloat) / window_estimate_.to(at::kFloat);

  // Non-finite loss: checked here where that is free or needed (nan_policy.h), else at the
  // host's next read of the loss (read_window_loss, end_epoch).
  const at::Tensor sum = terms.sum.detach().to(at::kDouble);
  if (nan_checks_.per_step && !std::isfinite(sum.item<double>())) {
    const std::string where = "at step " + std::to_string(step_ + 1) + " (epoch " + std::to_string(epoch_ + 1) +
                              ", batch " + std::to_string(train_loader_->next_batch_index()) + ", lr " +
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

  // 3. Backward through the (fp16: scaled) loss; gradients accumulate over the window.
  report_.begin(StepPhase::kBackward);
  backward(loss, window);
  report_.end(StepPhase::kBackward);

  // Report: accumulate on the device; the value is read only on log steps (a device sync).
  if (!window_poisoned_) {
    window_loss_sum_.add_(sum);
    window_count_.add_(items);
    epoch_loss_sum_.add_(sum);
    epoch_count_.add_(items);
  }
}

void Trainer::backward(const at::Tensor& loss, const Window& window) {
  // Data-parallel, last micro-batch: buckets are all-reduced as they fill, overlapping the rest
  // of backward; earlier micro-batches accumulate locally with no communication.
  if (grad_sync_) grad_sync_->before_backward(loss, window.last);
  if (grad_sync_ && window.last) {
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

void Trainer::optimizer_step() {
  // Data-parallel: global item count, and whether any rank saw a non-finite loss or a signal.
  const at::Tensor correction = agree_on_window();
  const bool poisoned = std::exchange(window_poisoned_, false);
  if (poisoned || window_empty_) {
    // nan_policy = "skip", or a window with no item on any rank (every sample skipped): no
    // update, but time advances like a step the fp16 scaler skips, so the schedule and the
    // step count stay aligned with the data.
    optim_.optimizer->zero_grad(/*set_to_none=*/true);
    scheduler_->step();
    ++step_;
    if (poisoned) ++skipped_steps_;
    return;
  }
  // torch::nn::utils::clip_grad_* take the parameters (they clip each one's .grad()), the
  // foreach correction below takes the gradients themselves.
  std::vector<at::Tensor> params, grads;
  for (const auto& group : optim_.optimizer->param_groups())
    for (const auto& p : group.params())
      if (p.grad().defined()) {
        params.push_back(p);
        grads.push_back(p.grad());
      }
  // 4a. Exact window normalisation (see step 2); the ratio is 1 when micro-batches are even.
  if (correction.defined() && !grads.empty())
    at::_foreach_mul_(grads, correction.to(grads.front().scalar_type()));
  else if (config_.train.grad_accum_steps > 1 && !grads.empty())
    at::_foreach_mul_(grads, (window_estimate_ / window_items_).to(grads.front().scalar_type()));
  // 4b. Clip once, after unscaling, right before the step (lessons-from-peers 3).
  if (config_.train.max_grad_norm > 0 || config_.train.clip_value > 0) {
    scaler_.unscale(*optim_.optimizer);
    if (config_.train.max_grad_norm > 0)
      torch::nn::utils::clip_grad_norm_(params, config_.train.max_grad_norm, config_.train.grad_norm_type);
    if (config_.train.clip_value > 0) torch::nn::utils::clip_grad_value_(params, config_.train.clip_value);
  }
  // 4c. Step (the fp16 scaler skips it on inf/NaN gradients and backs off), then the schedule
  //     advances one optimizer step, and gradients are set to none (frees them, skips a memset).
  scaler_.step(*optim_.optimizer);
  scaler_.update();
  scheduler_->step();
  optim_.optimizer->zero_grad(/*set_to_none=*/true);
  ++step_;
}

double Trainer::read_window_loss() {
  // Sync point on CUDA: waits for every queued kernel of the logging window. Data-parallel: the
  // loss over all ranks' items (a small all-reduce on log steps only).
  const auto [sum, count] = global_sums(window_loss_sum_, window_count_);
  window_loss_sum_.zero_();
  window_count_.zero_();
  if (!std::isfinite(sum) && nan_checks_.at_read)
    throw Error("the training loss became non-finite between steps " +
                std::to_string(std::max<int64_t>(1, step_ - config_.train.log_every_steps + 1)) + " and " +
                std::to_string(step_) + ". Lower optim.lr, check the data for NaN/Inf, or clip gradients.");
  return count > 0 ? sum / count : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace tp
