#include "engine/training/run_budget.h"

#include "tp/framework/checkpoint/checkpoint.h"

namespace tp {

int64_t RunBudget::epochs(int64_t epochs, int64_t steps_per_epoch) const {
  if (max_steps_ <= 0 || steps_per_epoch <= 0) return epochs;
  return (max_steps_ + steps_per_epoch - 1) / steps_per_epoch;
}

void RunBudget::start() { started_s_ = active_seconds(); }

double RunBudget::elapsed() const { return already_ + active_seconds() - started_s_; }

bool RunBudget::time_up() const {
  const double spent = elapsed();
  return max_seconds_ > 0 && spent >= max_seconds_;
}

void RunBudget::save_state(CheckpointContents& into) const { into.train_seconds = elapsed(); }

void RunBudget::load_state(const LoadedCheckpoint& from) { already_ = from.train_seconds; }

}  // namespace tp
