// The trainer's checkpoint side: what a checkpoint holds, when and under which names it is
// saved (through CheckpointManager), and how a run continues from one. Kept apart from
// trainer.cpp so each file reads as one concern.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>

#include <limits>
#include <mutex>
#include <sstream>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/config/write.h"
#include "tp/framework/engine/trainer.h"
#include "tp/framework/error.h"

namespace tp {

void Trainer::save(bool periodic, int64_t resume_epoch, int64_t resume_batch) {
  if (config_.train.fast_dev_run || config_.checkpoint.strategy == "no") return;
  // Best: only an evaluation taken at this very step describes these weights.
  const std::optional<double> monitor = evaluator_->monitor_at(step_);
  if (!periodic && !(monitor && checkpoints_.qualifies(*monitor))) return;
  sync_batchnorm_stats(); // all ranks: the statistics rank 0 writes are the agreed ones
  last_save_step_ = periodic ? step_ : last_save_step_;
  meters_.gather_running_loss(); // all ranks: a collective under data-parallel training
  std::vector<std::filesystem::path> written;
  if (writes_) {
    written = checkpoints_.save(checkpoint_contents(resume_epoch, resume_batch), step_, periodic, monitor);
  } else {
    checkpoints_.save(CheckpointContents{}, step_, periodic, monitor); // same ranking, no files
  }
  for (const auto& path : written) {
    Scalars value;
    if (monitor && path.filename().string().starts_with("best")) value.emplace_back(config_.checkpoint.monitor, *monitor);
    events_.defer(dispatch(TP_EVENT_CHECKPOINT_SAVE, value, path.string()) & TP_REQUEST_STOP);
  }
}

void Trainer::load_best() {
  const auto path = run_dir_ / "checkpoints" / "best.pt";
  // Data-parallel: only rank 0 needs the file (the run directory may be local to its node);
  // the others take its weights by broadcast.
  if (!checkpoints_.best() || (rank_ == 0 && !std::filesystem::exists(path))) {
    log_.warn("checkpoint.load_best_at_end: no best checkpoint was saved (is checkpoint.save_top_k 0, or was the "
              "run never evaluated?); keeping the final weights");
    return;
  }
  // A monitor on averaged weights (val_ema/..., val_swa/...) makes the best weights the
  // average's: they become the model's (the final evaluation is theirs, as val/*).
  std::string which = "live";
  for (const WeightAverage* average : {ema_.get(), swa_.get()})
    if (average && config_.checkpoint.monitor.starts_with("val_" + average->name() + "/")) which = average->name();
  const bool best_is_average = which != "live";
  if (rank_ == 0) {
    const LoadedCheckpoint best = load_checkpoint(path);
    restore_weights(best.weights(which, "checkpoint.monitor"), model_state_);
    events_.defer(dispatch(TP_EVENT_CHECKPOINT_LOAD, {{config_.checkpoint.monitor, best.best}}, path.string()) &
                  TP_REQUEST_STOP);
    log_.info("load_best_at_end: loaded " + std::string(best_is_average ? "the " + which + " weights of " : "") +
              path.string() + " (" + config_.checkpoint.monitor + " = " +
              format_number(best.best) + ", step " + std::to_string(best.step) + ")");
  }
  broadcast_model();
  if (evaluator_->enabled()) evaluator_->set_last(evaluate());
}

CheckpointContents Trainer::checkpoint_contents(int64_t resume_epoch, int64_t resume_batch) const {
  CheckpointContents contents;
  contents.model_state = &model_state_;
  contents.optimizer = optim_.optimizer.get();
  contents.optimizer_groups = optim_.group_names;
  contents.scheduler_state = scheduler_->state();
  contents.scaler_scale = steps_.scaler().get_scale();
  contents.scaler_growth_tracker = steps_.scaler().get_growth_tracker();
  contents.epoch = resume_epoch;
  contents.batch = resume_batch;
  contents.step = step_;
  contents.world_size = world_size_;
  {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    contents.rng_cpu = generator.get_state();
  }
  if (device_.is_cuda()) {
    // Dropout on the GPU draws from the device's generator: part of an exact resume too.
    at::Generator generator = at::globalContext().defaultGenerator(device_);
    std::lock_guard<std::mutex> lock(generator.mutex());
    contents.rng_cuda = generator.get_state();
  }
  contents.running_loss = meters_.running_loss(); // sync point on CUDA; checkpoints are rare
  contents.monitor = config_.checkpoint.monitor;
  // An evaluation at this very step may make this save the best.
  const std::optional<double> monitor = evaluator_->monitor_at(step_);
  const std::optional<double> best = monitor ? checkpoints_.best_including(*monitor) : checkpoints_.best();
  contents.best = best.value_or(std::numeric_limits<double>::quiet_NaN());
  contents.early_stopping = evaluator_->early_stopping_state();
  contents.config_toml = to_toml_text(config_.resolved);
  contents.plugins = parts_.plugin_versions;
  for (const WeightAverage* average : {ema_.get(), swa_.get()})
    if (average) contents.averages.push_back({average->name(), &average->state(), average->updates()});
  if (swa_schedule_) contents.swa_schedule = swa_schedule_->state();
  contents.train_seconds = budget_.elapsed();
  contents.micro_batch_splits = steps_.micro_batch_splits();
  contents.provenance_toml = provenance_toml(provenance_);
  return contents;
}

void Trainer::save_position(int64_t resume_epoch, int64_t resume_batch) {
  sync_batchnorm_stats();
  meters_.gather_running_loss(); // all ranks: a collective under data-parallel training
  if (rank_ != 0) return;
  const auto path = run_dir_ / "checkpoints" / "last.pt";
  save_checkpoint(path, checkpoint_contents(resume_epoch, resume_batch));
  events_.defer(dispatch(TP_EVENT_CHECKPOINT_SAVE, {}, path.string()) & TP_REQUEST_STOP);
}

void Trainer::resume_from(const LoadedCheckpoint& c) {
  // The saved (epoch, batch) position counts batches of a per-rank shard: with another number of
  // ranks it points elsewhere in the data, so an exact continuation is impossible.
  if (c.world_size != world_size_)
    throw ConfigError("--resume", "the checkpoint was written by a run of " + std::to_string(c.world_size) +
                                      " rank(s) and this run has " + std::to_string(world_size_) +
                                      "; its position in the epoch would not match the data. Resume with " +
                                      std::to_string(c.world_size) + " rank(s) (--nproc-per-node), or start a new "
                                      "run from its weights with train.init_weights = \"<checkpoint>\".");
  // A rebuilt plugin may compute something else: continuing is allowed, but not silently.
  for (const std::string& change : changed_plugins(c.provenance_toml, provenance_))
    log_.warn("--resume: the plugin " + change + ". The run continues with the new binary; if its behaviour "
              "changed, the rest of the run differs from the one the checkpoint's run would have trained.");
  restore_model_state(c, model_state_);
  for (WeightAverage* average : {ema_.get(), swa_.get()}) {
    if (!average) continue;
    // A checkpoint without the average (written before it was enabled) starts it afresh from
    // the resumed weights, as a new AveragedModel would.
    const SavedAverage* saved = c.average(average->name());
    average->load(saved ? saved->weights : c.model, saved ? saved->updates : 0);
    if (!saved)
      log_.warn(average->name() + ": the checkpoint holds no averaged weights; the average starts from the resumed weights");
  }
  if (!c.optimizer_archive.empty()) {
    torch::serialize::InputArchive archive;
    std::istringstream bytes(std::string(c.optimizer_archive.begin(), c.optimizer_archive.end()));
    archive.load_from(bytes);
    optim_.optimizer->load(archive);
  }
  if (!c.scheduler_state.empty()) scheduler_->load_state(c.scheduler_state);
  if (swa_ && !c.swa_schedule.empty()) {
    // Inside the averaging epochs: SWALR continues where it was (its state re-applies its lrs).
    swa_schedule_ = make_swa_scheduler(*optim_.optimizer, config_.swa.lr, config_.swa.anneal_epochs,
                                       config_.swa.anneal_strategy == "cos");
    swa_schedule_->load_state(c.swa_schedule);
  }
  if (GradScaler& scaler = steps_.scaler(); scaler.is_enabled() && c.scaler_scale > 0) {
    GradScalerState state = scaler.state();
    state.scale = c.scaler_scale;
    state.growth_tracker = c.scaler_growth_tracker;
    scaler.load_state(state);
  }
  if (c.rng_cpu.defined()) {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex()); // the generator is shared process-wide
    generator.set_state(c.rng_cpu);
  }
  if (c.rng_cuda.defined() && device_.is_cuda()) {
    at::Generator generator = at::globalContext().defaultGenerator(device_);
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(c.rng_cuda);
  }
  step_ = c.step;
  resumed_seconds_ = c.train_seconds;
  steps_.set_micro_batch_splits(c.micro_batch_splits);
  if (c.micro_batch_splits > 1)
    log_.info("resuming with micro-batches cut in " + std::to_string(c.micro_batch_splits) +
              " pieces, as train.on_oom = \"split\" left them after running out of memory");
  start_epoch_ = c.epoch;
  start_batch_ = c.batch;
  // The checkpoint holds the global sums (gather_running_loss); rank 0 carries them on.
  meters_.load_running_loss(c.running_loss, rank_ == 0);
  broadcast_model(); // a resumed data-parallel run loads, then takes rank 0's weights
  checkpoints_.restore();
  evaluator_->load_early_stopping_state(c.early_stopping);
  history_.resume(c.step);
  tensorboard_.resume(c.step, history_.records()); // drops events after c.step, as the history did
  events_.defer(dispatch(TP_EVENT_CHECKPOINT_LOAD, {{"step", double(c.step)}}) & TP_REQUEST_STOP);
  log_.info("resumed at epoch " + std::to_string(c.epoch + 1) + ", batch " + std::to_string(c.batch) + ", step " +
            std::to_string(c.step));
}

}  // namespace tp
