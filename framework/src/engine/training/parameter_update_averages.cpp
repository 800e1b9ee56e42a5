// The averages of the weights ([ema], [swa], docs/weight_averaging.md), ParameterUpdate's from
// their creation to SWA's end, PyTorch's recipe:
//   for epoch: train(); if epoch >= swa_start: swa_model.update_parameters(model); swa_scheduler.step()
//   update_bn(train_loader, swa_model); evaluate and save swa_model
// SWALR takes over the lr from the schedule at the first averaged epoch's start; the schedule
// stops advancing (its state is kept and checkpointed as it was).
#include <algorithm>
#include <string>
#include <utility>

#include "engine/training/parameter_update.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/error.h"
#include "tp/framework/util/short_number.h"

namespace tp {

void ParameterUpdate::create_averages(int64_t epochs) {
  if (const SwaSection& w = config_.swa; w.enabled) {
    if (std::any_of(w.lr.begin(), w.lr.end(), [](double lr) { return !(lr > 0.0); }))
      throw ConfigError("swa.lr", "swa.enabled = true needs swa.lr > 0: the lr the SWA epochs anneal to (SWALR's "
                                  "swa_lr), e.g. swa.lr = 0.05.");
    if (w.start_epoch > epochs)
      throw ConfigError("swa.start_epoch", "swa.start_epoch = " + std::to_string(w.start_epoch) +
                                               " is after the last epoch (train.epochs = " + std::to_string(epochs) +
                                               "): nothing would be averaged. Lower it.");
    // Buffers follow the live model (PyTorch's use_buffers=False); update_bn recomputes them at the end.
    const AverageRule rule{AverageRule::Kind::kEqual, 0.0, false, false};
    swa_ = std::make_unique<WeightAverage>("swa", rule, model_state_, device_);
    log_.info("swa: averaging from epoch " + std::to_string(w.start_epoch) + ", lr annealed to " +
              short_number(w.lr.front()) + " over " + std::to_string(w.anneal_epochs) + " epoch(s) (" +
              std::string(to_string(w.anneal_strategy)) + "); " + std::to_string(swa_->bytes() >> 20) +
              " MiB; evaluated as val_swa/*");
  }
  if (!config_.ema.enabled) return;
  const EmaSection& e = config_.ema;
  const AverageRule rule{AverageRule::Kind::kExponential, e.decay, e.warmup, e.buffers == AverageBuffers::kAverage};
  const c10::Device where = e.on_cpu ? c10::Device(c10::kCPU) : device_;
  ema_ = std::make_unique<WeightAverage>("ema", rule, model_state_, where);
  log_.info("ema: decay " + short_number(e.decay) + (e.warmup ? " with warmup" : "") + ", every " +
            std::to_string(e.every_steps) + " step(s), " +
            (e.buffers == AverageBuffers::kAverage ? "buffers averaged; " : "buffers copied; ") +
            std::to_string(ema_->bytes() >> 20) + " MiB on " + where.str() + "; evaluated as val_ema/*");
}

void ParameterUpdate::set_ema(std::unique_ptr<WeightAverage> ema) { ema_ = std::move(ema); }

std::vector<const WeightAverage*> ParameterUpdate::averages() const {
  std::vector<const WeightAverage*> out;
  for (const WeightAverage* average : {ema_.get(), swa_.get()})
    if (average != nullptr) out.push_back(average);
  return out;
}

void ParameterUpdate::begin_swa_epoch(int64_t epoch) {
  if (!swa_ || swa_schedule_ || epoch + 1 < config_.swa.start_epoch) return;
  swa_schedule_ = make_swa_scheduler(*optim_.optimizer, config_.swa.lr, config_.swa.anneal_epochs,
                                     config_.swa.anneal_strategy == AnnealShape::kCos);
  log_.info("swa: epoch " + std::to_string(epoch + 1) + " starts stochastic weight averaging; lr " +
            short_number(current_lr(*optim_.optimizer)) + " annealing to " + short_number(config_.swa.lr.front()));
}

void ParameterUpdate::end_swa_epoch() {
  if (!swa_schedule_) return;
  swa_->update(model_state_, weights_watch_.finite()); // never folds in non-finite weights
  swa_schedule_->step();
}

bool ParameterUpdate::finish_swa(const std::function<int64_t()>& refresh_batchnorm) {
  if (!swa_ || swa_->updates() == 0) return false;
  restore_weights(named_weights(swa_->state()), model_state_);
  std::string statistics;
  if (config_.swa.update_bn) {
    const int64_t layers = refresh_batchnorm();
    statistics = layers > 0 ? "; BatchNorm statistics of " + std::to_string(layers) +
                                  " layer(s) recomputed over the training split"
                            : "; no BatchNorm statistics to recompute";
    // The average's buffers become the recomputed ones: val_swa/* then equals val/*.
    swa_->load(named_weights(model_state_), swa_->updates());
  }
  log_.info("swa: the model now holds the average of " + std::to_string(swa_->updates()) + " epochs' weights" +
            statistics);
  return true;
}

}  // namespace tp
