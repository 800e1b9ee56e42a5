// The loop, top to bottom as nanoGPT's reads: step (one call, StepRunner), log, evaluate, save,
// stop (RunControl's answers). What happens inside a step, eager or graphed, is
// step_runner.cpp's (docs/engine.md, "Reading one training step").
#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <utility>

#include "tp/framework/data/batch_layout.h"
#include "tp/framework/data/field_contracts.h"
#include "tp/framework/engine/stop_signal.h"
#include "engine/training/trainer_impl.h"
#include "tp/framework/error.h"
#include "tp/framework/util/short_number.h"

namespace tp {

void Trainer::Impl::train_epoch(int64_t epoch) {
  parts_.model->set_training(true);
  // Frozen parameter groups join at their unfreeze_at_epoch; data-parallel, the gradient
  // all-reduce is rebuilt over the new trainable set (a collective shape check on every rank).
  if (set_frozen(optim_, epoch)) {
    int64_t trainable = 0;
    for (const auto& s : model_state_)
      if (!s.is_buffer && s.tensor.requires_grad()) trainable += s.tensor.numel();
    // A resumed run starts frozen (the constructor's epoch 0): its first epoch unfreezes every
    // group whose epoch has come, some of which may have trained before the checkpoint.
    const bool resumed = epoch == position_.start.epoch && (position_.start.epoch > 0 || position_.start.batch > 0);
    log_.info("epoch " + std::to_string(epoch + 1) +
              (resumed ? " (resumed): the parameter groups unfrozen by this epoch train ("
                       : ": frozen parameter groups start training (") +
              std::to_string(trainable) + " trainable parameters)");
    steps_.build_gradient_reducer();
  }
  // A resumed run starts inside its first epoch; checkpoints are written at window boundaries.
  int64_t done = std::exchange(position_.start.batch, 0);
  train_loader_->start_epoch(static_cast<uint64_t>(epoch), done);
  const int64_t batches = train_batches_;
  const int64_t accum = config_.train.grad_accum_steps;
  update_.begin_swa_epoch(epoch); // from swa.start_epoch on, SWALR replaces the schedule
  progress_.start_epoch(epoch, epochs_, batches);
  control_.defer(dispatch(TP_EVENT_EPOCH_BEGIN, {}));
  meters_.start_epoch();
  // An empty batch (every sample skipped) still counts: windows close where the schedule
  // expects, and data-parallel ranks stay in step.
  const MicroBatchFeed fetch = [&]() -> std::optional<MicroBatch> {
    auto batch = train_loader_->next();
    if (!batch) return std::nullopt;
    // Boxes as x, y, w, h or a class id out of range train silently to nothing: refused before
    // the first step (plugin ABI 1.9 field contracts).
    if (!std::exchange(first_batch_checked_, true))
      check_first_batch(parts_.loss->id(), parts_.loss->description(), *batch);
    const double wait = train_loader_->last_wait_seconds();
    progress_.add_data_wait(wait);
    meters_.add_batch(wait, batch_size(*batch, train_loader_->batch_layout()));
    return MicroBatch{std::move(*batch), train_loader_->next_batch_index()};
  };
  // A checkpoint a stop signal wrote during the evaluation after its step (eval.strategy =
  // "steps") owes that evaluation: it comes first, as it came before this batch in the run that
  // stopped.
  if (evaluator_->take_pending(Evaluator::Pending::kStep)) {
    evaluate_and_save_on_steps(epoch, /*owed=*/true);
    const int64_t next = train_loader_->next_batch_index();
    if (control_.signal() != 0) stop_on_signal({epoch, next});
    // A stop that evaluation decided (early stopping, a callback's request at EVAL_END) ends the
    // epoch here, as right after it in the run that stopped (the review: one more step trained).
    if (control_.stop()) {
      if (done < batches) control_.left_epoch_early({epoch, next});
      return;
    }
  }
  while (done < batches) {
    // Step: one optimizer step over the next accumulation window (the epoch's last window may be
    // short), with the ranks' agreement on every reason to stop or save (phases 1-6,
    // step_runner.cpp).
    const int64_t window_start = (done / accum) * accum;
    const int64_t window = std::min(accum, batches - window_start) - (done - window_start);
    control_.defer(dispatch(TP_EVENT_STEP_BEGIN, {}));
    trace_.before_step(step() + 1);
    // This rank's reasons to stop or save (callback requests so far, its clock, a signal) ride
    // with the step's agreement; one arriving during the step rides with the next.
    const uint32_t flags = control_.take_window_flags();
    // GNU timeout and SLURM send SIGCONT beside a SIGTERM to a running process: a blink is no
    // suspension worth a line (it is still left out of the clock: at most since the last reading).
    if (const Suspensions resumed = suspensions_.take(); resumed.count > 0 && resumed.seconds >= kNotedSuspensionSeconds)
      log_.info(describe_resumed(resumed));
    const StepOutcome outcome = steps_.optimizer_step(fetch, window, epoch, flags);
    trace_.after_step(step());
    record_cuda_graph_state(); // a capture or "auto"'s choice, into runtime.toml
    done += outcome.micro_batches;
    if (!outcome.complete) {
      control_.return_unagreed(flags); // no agreement took them: the next window's does
      break;
    }
    const int64_t next = train_loader_->next_batch_index();
    // At the epoch's last step the epoch is complete: a stop there resumes with the next one.
    control_.window_agreed(outcome.agreed, step(),
                           next < batches ? ResumePosition{epoch, next} : ResumePosition{epoch + 1, 0});
    meters_.count_step();
    save_if_requested({epoch, next}); // a deferred callback request
    // Log: on logging steps, the loss the step's agreement carried (a sync on CUDA).
    const double loss = outcome.update_stats ? log_step(epoch, outcome.group_lrs, *outcome.update_stats)
                                             : std::numeric_limits<double>::quiet_NaN();
    progress_.update(done, loss, outcome.lr);
    // Evaluate and save on the step strategies.
    evaluate_and_save_on_steps(epoch);
    // Stop: a signal saves exactly here and leaves (--resume continues from this batch); every
    // other reason ends the epoch, and fit() ends the run, or pauses it where a callback's stop
    // fell inside the epoch (as train.max_time does, so no batch is lost to a resume).
    if (control_.signal() != 0) stop_on_signal({epoch, next});
    if (control_.stop()) {
      if (done < batches) control_.left_epoch_early({epoch, next});
      break;
    }
  }
}

double Trainer::Impl::log_step(int64_t epoch, const std::vector<double>& group_lrs, const UpdateStats& update) {
  const double lr = group_lrs.front();
  const int64_t first = std::max<int64_t>(1, step() - config_.train.log_every_steps + 1);
  const auto [sum, count] =
      meters_.read_window_loss("between steps " + std::to_string(first) + " and " + std::to_string(step()));
  const double loss = count > 0 ? sum / count : std::numeric_limits<double>::quiet_NaN();
  HistoryRecord record{"step", {{"step", double(step())}, {"epoch", double(epoch)}, {"lr", lr}, {"train/loss", loss}}};
  for (const auto& term : meters_.last_terms()) record.values.push_back(term); // train/loss/<term>
  for (auto& value : meters_.read_window_throughput()) record.values.push_back(std::move(value));
  if (!std::isnan(update.grad_norm)) record.values.emplace_back("train/grad_norm", update.grad_norm);
  if (config_.train.max_grad_norm > 0) record.values.emplace_back("train/clipped_fraction", update.clipped_fraction);
  if (update.scaler_enabled) {
    record.values.emplace_back("amp/scale", update.scale);
    record.values.emplace_back("amp/skipped_steps", static_cast<double>(update.scaler_skipped));
  }
  // LR monitor: every parameter group's lr when their lrs differ ([[optim.param_groups]],
  // optim.layer_decay); groups at one lr (weight decay's split) would repeat `lr`. These are the
  // lrs the step trained with: the optimizer's groups already hold the next step's.
  for (std::size_t i = 0; group_lrs_differ_ && i < group_lrs.size(); ++i)
    record.values.emplace_back("lr/group" + std::to_string(i), group_lrs[i]);
  control_.rank0_write([&] { history_.add(std::move(record)); });
  // STEP_END requests are honoured now: one collective, and none for a run without callbacks.
  control_.honour_now(dispatch(TP_EVENT_STEP_END, {{"train/loss", loss}, {"lr", lr}}), events_.any());
  save_if_requested({epoch, train_loader_->next_batch_index()});
  return loss;
}

void Trainer::Impl::stop_on_signal(ResumePosition resume) {
  const int signal_number = control_.signal();
  save(SaveKind::kPosition, resume);
  const bool owed = evaluator_->pending() != Evaluator::Pending::kNone;
  const std::string stopped = "stopped by signal " + std::to_string(signal_number) + " at step " + std::to_string(step()) +
                              (owed ? " during its evaluation" : "");
  if (config_.train.fast_dev_run) throw Interrupted(signal_number, stopped + "; train.fast_dev_run saves nothing.");
  throw Interrupted(signal_number, stopped + "; saved " + (run_dir_ / "checkpoints" / "last.pt").string() +
                                       ". Continue with --resume auto" +
                                       (owed ? ", which runs that evaluation again first." : "."));
}

void Trainer::Impl::evaluate_and_save_on_steps(int64_t epoch, bool owed) {
  if (evaluator_->enabled() && (owed || due(config_.eval.strategy, config_.eval.every, false, epoch))) {
    if (!run_evaluation(/*epoch_line_follows=*/false, -1, /*stoppable=*/true)) {
      // A stop signal: the caller saves here, and the resumed run evaluates this step first.
      evaluator_->set_pending(Evaluator::Pending::kStep);
      return;
    }
    draw_plots();
  }
  const ResumePosition here{epoch, train_loader_->next_batch_index()};
  const bool periodic = due(config_.checkpoint.strategy, config_.checkpoint.every, false, epoch);
  if (periodic || evaluator_->evaluated_at(step())) save(periodic ? SaveKind::kPeriodic : SaveKind::kBest, here);
  save_if_requested(here); // an EVAL_END request
}

int64_t Trainer::Impl::rank_skipped_samples() const {
  return train_loader_->skipped_count() + position_.skipped_before_resume;
}

double Trainer::Impl::refuse_epoch_of_bad_samples(int64_t epoch, int64_t samples) {
  // data.on_bad_sample = "skip" carries a run past bad files; an epoch in which every sample of
  // every rank was bad trained nothing, and ended as a success with untrained weights saved
  // (data trial F1). Summed over the ranks, so all of them stop together. Both checks compare
  // what this process read (skips and loads since a resume inside the epoch): the earlier
  // process's skips (skipped_before_resume) only join the record, or a resume at the epoch's last
  // batch, which loads nothing, would read as an epoch of bad samples.
  const auto options = at::TensorOptions().dtype(at::kDouble).device(collectives_->device());
  std::vector<at::Tensor> counts{at::tensor({static_cast<double>(train_loader_->skipped_count()), static_cast<double>(samples),
                                             static_cast<double>(position_.skipped_before_resume)},
                                            options)};
  collectives_->all_reduce_sum(counts, "sum the epoch's loaded and skipped training samples");
  const at::Tensor totals = counts.front().cpu();
  const double skipped = totals[0].item<double>(), loaded = totals[1].item<double>(), earlier = totals[2].item<double>();
  const std::string on_rank = collectives_->world_size() > 1 ? " on rank " + std::to_string(collectives_->rank()) : "";
  // A share of bad files past data.max_bad_fraction is a broken data set, not a few bad files
  // (data trial F6: 14% of the files empty trained on to exit 0); every rank sees the same sums.
  if (loaded > 0 && skipped / (skipped + loaded) > config_.data.max_bad_fraction)
    throw Error(with_skipped_samples(
        "epoch " + std::to_string(epoch + 1) + ": " + short_number(skipped, 12) + " of " + short_number(skipped + loaded, 12) +
            " training samples (" + short_number(100.0 * skipped / (skipped + loaded), 3) +
            "%) failed to load, more than data.max_bad_fraction = " + short_number(config_.data.max_bad_fraction) +
            " allows, so nothing of this epoch is saved. The first failures" + on_rank +
            " below say why; `host plugins check <dataset>.so --config <run.toml> --samples all` lists every bad "
            "file. Fix or remove them, or raise data.max_bad_fraction (1 = no limit).",
        train_loader_->first_skipped()));
  if (loaded > 0 || skipped == 0) return skipped + earlier;
  throw Error(with_skipped_samples("epoch " + std::to_string(epoch + 1) + ": every training sample failed to load (" +
                               short_number(skipped, 12) + " skipped under data.on_bad_sample = \"skip\"), so "
                               "nothing was trained and nothing of this epoch is saved. The first failures" + on_rank +
                               " below say why; fix the files or the dataset's settings (a wrong root, "
                               "extensions or decoder), or set data.on_bad_sample = \"fail\" to stop at the first.",
                           train_loader_->first_skipped()));
}

void Trainer::Impl::end_epoch(int64_t epoch) {
  // A pause (train.max_time, a callback's stop) cut this epoch short: it ends after the resume
  // (fit() saves where it stopped).
  if (control_.pause() && control_.pause()->epoch == epoch) return;
  // An averaged epoch folds into the SWA average, once: a checkpoint a stop signal wrote during
  // this epoch end's evaluation holds the folded average.
  if (!evaluator_->take_pending(Evaluator::Pending::kEpochEnd)) update_.end_swa_epoch();
  const TrainMeters::EpochClock clock = meters_.epoch_clock();
  const double seconds = clock.seconds;
  const double skipped_all =
      config_.data.on_bad_sample == BadSamplePolicy::kSkip ? refuse_epoch_of_bad_samples(epoch, clock.samples) : 0.0;
  Scalars eval;
  if (evaluator_->enabled() && due(config_.eval.strategy, config_.eval.every, true, epoch)) {
    std::optional<Scalars> evaluated = run_evaluation(/*epoch_line_follows=*/true, -1, /*stoppable=*/true);
    if (!evaluated) {
      // A stop signal: saved at the epoch's last batch, so the resumed run ends this epoch again
      // (its record, evaluation and saves), without a second fold.
      evaluator_->set_pending(Evaluator::Pending::kEpochEnd);
      stop_on_signal({epoch, train_batches_});
    }
    eval = std::move(*evaluated);
  }
  // Read (and cleared) after the evaluation: a save during it keeps the epoch's sums for the resume.
  const auto [epoch_sum, epoch_count] = meters_.read_epoch_loss("in epoch " + std::to_string(epoch + 1));
  const double train_loss = epoch_sum / epoch_count;
  const Scalars train_terms = meters_.last_terms(); // train/loss/<term> of the epoch
  const double lr = current_lr(*optim_.optimizer);
  HistoryRecord record{"epoch",
                       {{"epoch", double(epoch + 1)},
                        {"step", double(step())},
                        {"lr", lr},
                        {"train/loss", train_loss},
                        {"time/epoch_s", seconds},
                        {"time/data_wait_fraction", seconds > 0 ? clock.wait_s / seconds : 0.0},
                        {"throughput/samples_per_s", seconds > 0 ? double(clock.samples) / seconds : 0.0}}};
  record.values.insert(record.values.end(), train_terms.begin(), train_terms.end());
  // data.on_bad_sample = "skip": how many training samples the ranks dropped, and this rank's first few.
  if (config_.data.on_bad_sample == BadSamplePolicy::kSkip) {
    // Every rank's, as val/skipped_samples beside it (data trial F21: it was rank 0's alone).
    record.values.emplace_back("data/skipped_samples", skipped_all);
    // After a resume inside the epoch the clock counts the samples since; the earlier process's
    // skips (every rank's, from the checkpoint) are in the record but not in the list below.
    const int64_t here = train_loader_->skipped_count(), before = position_.skipped_before_resume;
    std::string head = "epoch " + std::to_string(epoch + 1) + ": skipped " + std::to_string(here) + " bad samples";
    if (before == 0) head += " of " + std::to_string(here + clock.samples);
    if (collectives_->world_size() > 1) head += " on this rank";
    if (before > 0) head += " since the resume, besides " + std::to_string(before) + " before it (every rank's, not listed)";
    if (here + before > 0) log_.warn(with_skipped_samples(head, train_loader_->first_skipped()));
  }
  position_.skipped_before_resume = 0; // counted in this epoch's record
  for (const auto& value : eval) record.values.push_back(value);
  control_.rank0_write([&] {
    history_.add(record);
    history_.flush_csv();
  });
  Scalars summary{{"train/loss", train_loss}};
  summary.insert(summary.end(), eval.begin(), eval.end());
  progress_.end_epoch(summary);
  std::string line = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(epochs_);
  line += scalars_text(summary);
  line += " time=" + short_number(seconds) + "s data_wait=" +
          std::to_string(static_cast<int>(seconds > 0 ? 100.0 * clock.wait_s / seconds : 0.0)) + "%";
  log_.file_only(line);
  control_.honour_now(dispatch(TP_EVENT_EPOCH_END, summary), events_.any());
  // A run paused at this epoch's end (train.max_time) resumes with the next epoch.
  const ResumePosition resume = control_.pause().value_or(ResumePosition{epoch + 1, 0});
  const bool periodic = due(config_.checkpoint.strategy, config_.checkpoint.every, true, epoch);
  if (periodic || evaluator_->evaluated_at(step())) save(periodic ? SaveKind::kPeriodic : SaveKind::kBest, resume);
  save_if_requested(resume);
  if (!eval.empty()) draw_plots();
}

std::optional<Scalars> Trainer::Impl::run_evaluation(bool epoch_line_follows, int64_t trained_in, bool stoppable) {
  // A stop signal the step's agreement carried: nothing to evaluate before the save.
  if (stoppable && control_.signal() != 0) return std::nullopt;
  sync_batchnorm_stats(); // each rank evaluates its shard: with the same statistics
  std::function<uint32_t()> stop_flags;
  if (stoppable) stop_flags = [this] { return control_.evaluation_stop_flags(); };
  std::optional<Scalars> evaluated = evaluator_->run(step(), update_.active_schedule(), stop_flags);
  if (!evaluated) {
    control_.evaluation_stopped(evaluator_->stopped_by()); // agreed by every rank
    return std::nullopt;
  }
  Scalars eval = std::move(*evaluated);
  for (const auto& [name, value] : eval) {
    if (!name.ends_with("/skipped_samples")) continue;
    // As the epoch's training skips are reported: the count over the ranks, this rank's first few.
    log_.warn(with_skipped_samples("evaluation: skipped " + short_number(value, 9) + " bad samples (" + name +
                               "); its loss and metrics cover the other samples only",
                           evaluator_->first_skipped()));
    break;  // an average's pass (val_ema) skips the same samples
  }
  // EVAL_END requests: a stop ends the run after this evaluation; a save is taken by the caller
  // at its position.
  const uint32_t requests = dispatch(TP_EVENT_EVAL_END, eval);
  control_.honour_now(requests, events_.any());
  // The epochs trained so far: the current one too when this is its closing evaluation.
  const int64_t epochs_trained = position_.epoch + (epoch_line_follows ? 1 : 0);
  // Decided from the evaluation, which every rank computes from the same reduced values; the
  // reason is the run's closing line (host train's report), logged once.
  if (auto reason = evaluator_->early_stop(eval, epochs_trained))
    control_.stop_for(StopCause::kEarlyStopping, "early stopping: " + *reason);
  // An evaluation no epoch record takes (eval.strategy = "steps"; the final one after SWA's
  // finish or an unevaluated last step) is a record of its own: before, the SWA model's final
  // score reached the log's last line but not the history, so `host compare` read an older one.
  if (!epoch_line_follows) {
    // The epoch the step trained in (0-based, as step records): fit()'s final evaluation says
    // which, the position having moved past it.
    const int64_t epoch_index = trained_in >= 0 ? trained_in : position_.epoch;
    HistoryRecord record{"eval", {{"step", double(step())}, {"epoch", double(epoch_index)}}};
    record.values.insert(record.values.end(), eval.begin(), eval.end());
    control_.rank0_write([&] { history_.add(record); });
    // Between epochs nothing else shows these values: the console and train.log get a line.
    const int64_t epoch = epoch_index + 1;
    log_.info("step " + std::to_string(step()) + " (epoch " + std::to_string(epoch) + "):" + scalars_text(eval));
  }
  return eval;
}

bool Trainer::Impl::due(IntervalStrategy strategy, int64_t every, bool at_epoch_end, int64_t epoch) const {
  if (strategy == IntervalStrategy::kSteps) return !at_epoch_end && step() % every == 0;
  if (strategy != IntervalStrategy::kEpoch || !at_epoch_end) return false;
  return (epoch + 1) % every == 0 || epoch + 1 == epochs_ || control_.stop();
}

}  // namespace tp
