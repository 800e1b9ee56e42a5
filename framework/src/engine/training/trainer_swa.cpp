// Stochastic weight averaging in the loop ([swa], docs/weight_averaging.md), PyTorch's recipe:
//   for epoch: train(); if epoch >= swa_start: swa_model.update_parameters(model); swa_scheduler.step()
//   update_bn(train_loader, swa_model); evaluate and save swa_model
// SWALR takes over the lr from the schedule at the first averaged epoch's start; the schedule
// stops advancing (its state is kept and checkpointed as it was).
#include <ATen/ATen.h>

#include <string>

#include "engine/training/batchnorm_refresh.h"
#include "engine/training/trainer_impl.h"
#include "tp/framework/error.h"
#include "tp/framework/util/short_number.h"

namespace tp {

void Trainer::Impl::begin_swa_epoch(int64_t epoch) {
  if (!update_.begin_swa_epoch(epoch)) return;
  log_.info("swa: epoch " + std::to_string(epoch + 1) + " starts stochastic weight averaging; lr " +
            short_number(current_lr(*optim_.optimizer)) + " annealing to " + short_number(config_.swa.lr.front()));
}

void Trainer::Impl::end_swa_epoch() { update_.end_swa_epoch(); }

bool Trainer::Impl::finish_swa() {
  WeightAverage* swa = update_.swa();
  if (!swa || swa->updates() == 0) return false;
  restore_weights(named_weights(swa->state()), model_state_);
  std::string statistics;
  if (config_.swa.update_bn) {
    const int64_t layers = refresh_batchnorm_statistics(parts_, model_state_, *train_loader_,
                                                        static_cast<uint64_t>(epochs_), train_batches_, placement_, *collectives_);
    statistics = layers > 0 ? "; BatchNorm statistics of " + std::to_string(layers) +
                                  " layer(s) recomputed over the training split"
                            : "; no BatchNorm statistics to recompute";
    // The average's buffers become the recomputed ones: val_swa/* then equals val/*.
    swa->load(named_weights(model_state_), swa->updates());
  }
  log_.info("swa: the model now holds the average of " + std::to_string(swa->updates()) + " epochs' weights" +
            statistics);
  return true;
}

}  // namespace tp
