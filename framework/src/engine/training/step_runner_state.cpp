// The step runner's part of a checkpoint (ARCH-20): what advances with every optimizer step.
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>

#include <sstream>

#include "step_capture.h"

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/engine/step_runner.h"
#include "tp/framework/error.h"

namespace tp {

void StepRunner::save_state(CheckpointContents& into) const {
  into.step = step_;
  into.optimizer = optim_.optimizer.get();
  into.optimizer_groups = optim_.group_names;
  into.scheduler_state = schedule_->state();
  if (swa_schedule_) into.swa_schedule = swa_schedule_->state();
  into.scaler_scale = parameter_update_.scaler().get_scale();
  into.scaler_growth_tracker = parameter_update_.scaler().get_growth_tracker();
  into.micro_batch_splits = splits_;
  if (ema_) into.averages.push_back({ema_->name(), &ema_->state(), ema_->updates()});
}

void StepRunner::load_state(const LoadedCheckpoint& from) {
  // A captured step would write into the optimizer state and scaler this replaces: capture anew.
  if (capture_) capture_->invalidate();
  step_ = from.step;
  if (!from.optimizer_archive.empty()) {
    torch::serialize::InputArchive archive;
    std::istringstream bytes(std::string(from.optimizer_archive.begin(), from.optimizer_archive.end()));
    archive.load_from(bytes);
    optim_.optimizer->load(archive);
  }
  if (!from.scheduler_state.empty()) schedule_->load_state(from.scheduler_state);
  if (config_.swa.enabled && !from.swa_schedule.empty()) {
    // Inside the averaging epochs: SWALR continues where it was (its state re-applies its lrs).
    swa_schedule_ = make_swa_scheduler(*optim_.optimizer, config_.swa.lr, config_.swa.anneal_epochs,
                                       config_.swa.anneal_strategy == "cos");
    swa_schedule_->load_state(from.swa_schedule);
  }
  if (parameter_update_.scaler().is_enabled() && from.scaler_scale > 0) {
    GradScalerState state = parameter_update_.scaler().state();
    state.scale = from.scaler_scale;
    state.growth_tracker = from.scaler_growth_tracker;
    parameter_update_.scaler().load_state(state);
  }
  TP_CHECK(from.micro_batch_splits >= 1, "micro-batch splits must be >= 1, got ", from.micro_batch_splits);
  splits_ = from.micro_batch_splits;
  if (splits_ > 1)
    log_.info("resuming with micro-batches cut in " + std::to_string(splits_) +
              " pieces, as train.on_oom = \"split\" left them after running out of memory");
  if (ema_) {
    // A checkpoint without the average (written before it was enabled) starts it afresh from
    // the resumed weights, as a new AveragedModel would.
    const SavedAverage* saved = from.average(ema_->name());
    ema_->load(saved ? saved->weights : from.model, saved ? saved->updates : 0);
    if (!saved) log_.warn("ema: the checkpoint holds no averaged weights; the average starts from the resumed weights");
  }
}

}  // namespace tp
