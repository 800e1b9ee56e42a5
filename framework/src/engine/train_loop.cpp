// The loop: epochs of accumulation windows, what follows each optimizer step (the log step,
// step-strategy evaluations and saves, callback requests) and each epoch. The step itself is
// StepRunner's (step_runner.cpp).
#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "tp/framework/engine/stop_signal.h"
#include "tp/framework/engine/trainer.h"
#include "tp/framework/error.h"

namespace tp {

void Trainer::train_epoch(int64_t epoch) {
  parts_.model->set_training(true);
  // Frozen parameter groups join at their unfreeze_at_epoch; data-parallel, the gradient
  // all-reduce is rebuilt over the new trainable set (a collective shape check on every rank).
  if (set_frozen(optim_, epoch)) {
    log_.info("epoch " + std::to_string(epoch + 1) + ": frozen parameter groups start training");
    if (dist_) steps_.start_data_parallel();
  }
  // A resumed run starts inside its first epoch; checkpoints are written at window boundaries.
  int64_t done = std::exchange(start_batch_, 0);
  train_loader_->start_epoch(static_cast<uint64_t>(epoch), done);
  const int64_t batches = train_batches_;
  const int64_t accum = config_.train.grad_accum_steps;
  begin_swa_epoch(epoch);
  progress_.start_epoch(epoch, epochs_, batches);
  events_.defer(dispatch(TP_EVENT_EPOCH_BEGIN, {}));
  meters_.start_epoch();
  while (done < batches) {
    // An empty batch (every sample skipped) still counts: windows close where the schedule
    // expects, and data-parallel ranks stay in step.
    auto batch = train_loader_->next();
    if (!batch) break;
    const double wait = train_loader_->last_wait_seconds();
    progress_.add_data_wait(wait);
    meters_.add_batch(wait, batch->empty() ? 0 : batch->front().second.size(0));
    const int64_t window_start = (done / accum) * accum;
    const AccumulationWindow window{std::min(accum, batches - window_start), done == window_start,
                                    done + 1 == std::min(window_start + accum, batches)};
    if (window.first) events_.defer(dispatch(TP_EVENT_STEP_BEGIN, {}));
    const StepPosition at{step_, epoch, train_loader_->next_batch_index()};
    // train.max_time rides in the window's agreement as a stop request, so all ranks stop together.
    const bool time_up = window.last && budget_.time_up();
    const uint32_t requests = window.last ? events_.take_deferred() | (time_up ? kRequestBudgetStop : 0u) : 0u;
    const WindowAgreement agreed = steps_.train_step(*batch, window, at, requests);
    ++done;
    if (!window.last) continue;
    // The window's update is done (or skipped): time advances one optimizer step either way.
    // The history records the lr this step trained with (Lightning's LearningRateMonitor).
    const double lr = current_lr(*optim_.optimizer);
    if (!swa_schedule_) scheduler_->step(); // SWALR steps per epoch (end_swa_epoch)
    ++step_;
    if (ema_ && step_ % config_.ema.every_steps == 0) ema_->update(model_state_);
    if (agreed.requests & kRequestBudgetStop) {
      // At the epoch's last step the epoch is complete: the run resumes with the next one.
      const int64_t next = train_loader_->next_batch_index();
      budget_stop_ = next < batches ? std::pair<int64_t, int64_t>{epoch, next} : std::pair<int64_t, int64_t>{epoch + 1, 0};
      stop_requested_ = true;
      stop_reason_ = "train.max_time (" + config_.train.max_time + ") is used up at step " + std::to_string(step_) +
                     "; saved where it stopped. To continue, raise train.max_time and run again with --resume auto.";
    }
    after_optimizer_step(epoch, done, agreed.requests & ~kRequestBudgetStop, lr);
    // Data-parallel: the signal some rank saw, agreed at this window's end, so all stop together.
    if (const int signal_number = dist_ ? agreed.signal : pending_stop_signal(); signal_number != 0) {
      // Finish the step, save exactly here, and leave: --resume continues from this batch.
      save_position(epoch, train_loader_->next_batch_index());
      throw Interrupted(signal_number, "stopped by signal " + std::to_string(signal_number) + " at step " +
                                           std::to_string(step_) + "; saved " +
                                           (run_dir_ / "checkpoints" / "last.pt").string() +
                                           ". Continue with --resume auto.");
    }
    if (stop_requested_ || budget_.steps_done(step_)) break;
  }
}

void Trainer::after_optimizer_step(int64_t epoch, int64_t done, uint32_t deferred, double lr) {
  meters_.count_step();
  // Requests deferred from FIT_BEGIN, EPOCH_BEGIN, STEP_BEGIN and CHECKPOINT_* events, agreed
  // over ranks in the window's all-reduce.
  if (deferred & TP_REQUEST_STOP) request_stop();
  if (deferred & TP_REQUEST_SAVE) save_position(epoch, train_loader_->next_batch_index());
  const double loss = step_ % config_.train.log_every_steps == 0 ? log_step(epoch, lr)
                                                                 : std::numeric_limits<double>::quiet_NaN();
  progress_.update(done, loss, lr);
  // Step strategies: evaluate, then save (so the save can be the best one).
  if (evaluator_->enabled() && due(config_.eval.strategy, config_.eval.every, false, epoch)) {
    run_evaluation();
    draw_plots();
  }
  const bool periodic = due(config_.checkpoint.strategy, config_.checkpoint.every, false, epoch);
  if (periodic || evaluator_->evaluated_at(step_)) save(periodic, epoch, train_loader_->next_batch_index());
  if (std::exchange(save_requested_, false)) save_position(epoch, train_loader_->next_batch_index());
}

double Trainer::log_step(int64_t epoch, double lr) {
  // Sync point on CUDA: waits for every queued kernel of the logging window. Data-parallel: the
  // loss over all ranks' items (a small all-reduce on log steps only), so every rank that finds
  // it non-finite finds it at the same step and all stop together.
  const auto [sum, count] = meters_.read_window_loss();
  steps_.check_read_loss(sum, "between steps " +
                                  std::to_string(std::max<int64_t>(1, step_ - config_.train.log_every_steps + 1)) +
                                  " and " + std::to_string(step_));
  const double loss = count > 0 ? sum / count : std::numeric_limits<double>::quiet_NaN();
  HistoryRecord record{"step", {{"step", double(step_)}, {"epoch", double(epoch)}, {"lr", lr}, {"train/loss", loss}}};
  for (const auto& term : meters_.last_terms()) record.values.push_back(term); // train/loss/<term>
  for (auto& value : meters_.read_window_throughput()) record.values.push_back(std::move(value));
  const StepRunner::UpdateStats update = steps_.read_update_stats();
  if (!std::isnan(update.grad_norm)) record.values.emplace_back("train/grad_norm", update.grad_norm);
  if (config_.train.max_grad_norm > 0) record.values.emplace_back("train/clipped_fraction", update.clipped_fraction);
  if (steps_.scaler().is_enabled()) {
    record.values.emplace_back("amp/scale", update.scale);
    record.values.emplace_back("amp/skipped_steps", static_cast<double>(update.scaler_skipped));
  }
  // LR monitor: every parameter group's lr when they differ ([[optim.param_groups]]).
  const auto& groups = optim_.optimizer->param_groups();
  bool differ = false;
  for (const auto& group : groups) differ |= group.options().get_lr() != lr;
  for (std::size_t i = 0; differ && i < groups.size(); ++i)
    record.values.emplace_back("lr/group" + std::to_string(i), groups[i].options().get_lr());
  history_.add(std::move(record));
  const uint32_t requests = events_.agree(dispatch(TP_EVENT_STEP_END, {{"train/loss", loss}, {"lr", lr}}));
  if (requests & TP_REQUEST_STOP) request_stop();
  if (requests & TP_REQUEST_SAVE) save_position(epoch, train_loader_->next_batch_index());
  return loss;
}

void Trainer::end_epoch(int64_t epoch) {
  // train.max_time cut this epoch short: it ends after the resume (fit() saves where it stopped).
  if (budget_stop_ && budget_stop_->first == epoch) return;
  end_swa_epoch();
  const auto [epoch_sum, epoch_count] = meters_.read_epoch_loss();
  steps_.check_read_loss(epoch_sum, "in epoch " + std::to_string(epoch + 1));
  const double train_loss = epoch_sum / epoch_count;
  const Scalars train_terms = meters_.last_terms(); // train/loss/<term> of the epoch
  const TrainMeters::EpochClock clock = meters_.epoch_clock();
  const double seconds = clock.seconds;
  Scalars eval;
  if (evaluator_->enabled() && due(config_.eval.strategy, config_.eval.every, true, epoch)) eval = run_evaluation();
  const double lr = current_lr(*optim_.optimizer);
  HistoryRecord record{"epoch",
                       {{"epoch", double(epoch + 1)},
                        {"step", double(step_)},
                        {"lr", lr},
                        {"train/loss", train_loss},
                        {"time/epoch_s", seconds},
                        {"time/data_wait_fraction", seconds > 0 ? clock.wait_s / seconds : 0.0},
                        {"throughput/samples_per_s", seconds > 0 ? double(clock.samples) / seconds : 0.0}}};
  record.values.insert(record.values.end(), train_terms.begin(), train_terms.end());
  // data.on_bad_sample = "skip": how many training samples this rank dropped, and the first few.
  if (const int64_t skipped = train_loader_->skipped_count(); config_.data.on_bad_sample == "skip") {
    record.values.emplace_back("data/skipped_samples", double(skipped));
    std::string note = "epoch " + std::to_string(epoch + 1) + ": skipped " + std::to_string(skipped) + " bad samples";
    for (const SkippedSample& s : train_loader_->first_skipped()) note += "\n  index " + std::to_string(s.index) + ": " + s.message;
    if (skipped > 0) log_.warn(note);
  }
  for (const auto& value : eval) record.values.push_back(value);
  history_.add(record);
  history_.flush_csv();
  Scalars summary{{"train/loss", train_loss}};
  summary.insert(summary.end(), eval.begin(), eval.end());
  progress_.end_epoch(summary);
  std::string line = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(epochs_);
  for (const auto& [name, value] : summary) line += " " + name + "=" + format_number(value);
  line += " time=" + format_number(seconds) + "s data_wait=" +
          std::to_string(static_cast<int>(seconds > 0 ? 100.0 * clock.wait_s / seconds : 0.0)) + "%";
  log_.file_only(line);
  const uint32_t requests = events_.agree(dispatch(TP_EVENT_EPOCH_END, summary));
  if (requests & TP_REQUEST_STOP) request_stop();
  if (requests & TP_REQUEST_SAVE) save_requested_ = true;
  // An epoch cut short by train.max_time resumes where it stopped, not at the next epoch.
  const auto [resume_epoch, resume_batch] = budget_stop_.value_or(std::pair<int64_t, int64_t>{epoch + 1, 0});
  const bool periodic = due(config_.checkpoint.strategy, config_.checkpoint.every, true, epoch);
  if (periodic || evaluator_->evaluated_at(step_)) save(periodic, resume_epoch, resume_batch);
  if (std::exchange(save_requested_, false)) save_position(resume_epoch, resume_batch);
  if (!eval.empty()) draw_plots();
}

Scalars Trainer::run_evaluation() {
  sync_batchnorm_stats(); // each rank evaluates its shard: with the same statistics
  Scalars eval = evaluator_->run(step_, active_schedule());
  const uint32_t requests = events_.agree(dispatch(TP_EVENT_EVAL_END, eval));
  if (requests & TP_REQUEST_STOP) request_stop();
  if (requests & TP_REQUEST_SAVE) save_requested_ = true; // the caller saves at its position
  if (auto reason = evaluator_->early_stop(eval)) {
    // Decided from the evaluation, which every rank computes from the same reduced values.
    stop_requested_ = true;
    stop_reason_ = "early stopping: " + *reason;
    log_.info(stop_reason_);
  }
  if (config_.eval.strategy == "steps") {
    HistoryRecord record{"eval", {{"step", double(step_)}, {"epoch", double(epoch_)}}};
    record.values.insert(record.values.end(), eval.begin(), eval.end());
    history_.add(record);
  }
  return eval;
}

bool Trainer::due(const std::string& strategy, int64_t every, bool at_epoch_end, int64_t epoch) const {
  if (strategy == "steps") return !at_epoch_end && step_ % every == 0;
  if (strategy != "epoch" || !at_epoch_end) return false;
  return (epoch + 1) % every == 0 || epoch + 1 == epochs_ || stop_requested_;
}

}  // namespace tp
