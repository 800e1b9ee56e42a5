// The step runner's part of a checkpoint (ARCH-20): the micro-batch splits. What advances with
// every step is the parameter update's (parameter_update_state.cpp).
#include <string>

#include "step_capture.h"

#include "tp/framework/checkpoint/checkpoint.h"
#include "engine/training/step_runner.h"
#include "tp/framework/error.h"

namespace tp {

void StepRunner::save_state(CheckpointContents& into) const { into.micro_batch_splits = splits_; }

void StepRunner::load_state(const LoadedCheckpoint& from) {
  // A captured step would write into the optimizer state and scaler the update's own load
  // replaces: capture anew.
  if (capture_) capture_->invalidate();
  TP_CHECK(from.micro_batch_splits >= 1, "micro-batch splits must be >= 1, got ", from.micro_batch_splits);
  splits_ = from.micro_batch_splits;
  if (splits_ > 1)
    log_.info("resuming with micro-batches cut in " + std::to_string(splits_) +
              " pieces, as train.on_oom = \"split\" left them after running out of memory");
}

}  // namespace tp
