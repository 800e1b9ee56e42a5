// The parameter update's parts of a checkpoint (ARCH-20): the step count, the optimizer, the
// schedules and the grad scaler; and, as a role of their own, the averages of the weights.
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>

#include <sstream>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"
#include "engine/training/parameter_update.h"

namespace tp {

void ParameterUpdate::save_state(CheckpointContents& into) const {
  into.step = step_;
  into.optimizer = optim_.optimizer.get();
  into.optimizer_groups = optim_.group_names;
  into.scheduler_state = schedule_->state();
  if (swa_schedule_) into.swa_schedule = swa_schedule_->state();
  into.scaler_scale = scaler_.get_scale();
  into.scaler_growth_tracker = scaler_.get_growth_tracker();
}

void ParameterUpdate::load_state(const LoadedCheckpoint& from) {
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
                                       config_.swa.anneal_strategy == AnnealShape::kCos);
    swa_schedule_->load_state(from.swa_schedule);
  }
  if (scaler_.is_enabled() && from.scaler_scale > 0) {
    GradScalerState state = scaler_.state();
    state.scale = from.scaler_scale;
    state.growth_tracker = from.scaler_growth_tracker;
    scaler_.load_state(state);
  }
}

void ParameterUpdate::save_averages(CheckpointContents& into) const {
  for (const WeightAverage* average : averages())
    into.averages.push_back({average->name(), &average->state(), average->updates()});
}

void ParameterUpdate::load_averages(const LoadedCheckpoint& from) {
  for (WeightAverage* average : {ema_.get(), swa_.get()}) {
    if (average == nullptr) continue;
    // A checkpoint without the average (written before it was enabled) starts it afresh from
    // the resumed weights, as a new AveragedModel would.
    const SavedAverage* saved = from.average(average->name());
    average->load(saved ? saved->weights : from.model, saved ? saved->updates : 0);
    if (!saved)
      log_.warn(average->name() + ": the checkpoint holds no averaged weights; the average starts from the resumed "
                                  "weights");
  }
}

}  // namespace tp
