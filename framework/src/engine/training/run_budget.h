// Run budgets: train.max_steps (optimizer steps; the schedule and the epoch count follow from it)
// and train.max_time (training time, counted across resumes, suspensions left out; the run stops
// collectively at the next step boundary, saves and exits 0). docs/engine.md, "Budgets".
#pragma once

#include <cstdint>
#include <string>

#include "engine/training/active_clock.h"
#include "tp/framework/config/value_kinds.h"  // parse_duration: train.max_time is parsed when the config is loaded

namespace tp {

struct CheckpointContents;
struct LoadedCheckpoint;

class RunBudget {
 public:
  /// `max_steps` 0 and `max_seconds` 0: no budget.
  RunBudget(int64_t max_steps, double max_seconds) : max_steps_(max_steps), max_seconds_(max_seconds) {}

  /// Epochs of `steps_per_epoch` optimizer steps that max_steps needs (`epochs` without it).
  int64_t epochs(int64_t epochs, int64_t steps_per_epoch) const;
  /// Optimizer steps of the whole run: min(max_steps, epochs x steps per epoch) with max_steps.
  int64_t total_steps(int64_t run_steps) const { return max_steps_ > 0 && max_steps_ < run_steps ? max_steps_ : run_steps; }
  /// Whether `step` optimizer steps complete the run (max_steps).
  bool steps_done(int64_t step) const { return max_steps_ > 0 && step >= max_steps_; }

  /// Starts the clock; the seconds a resumed run's checkpoint trained count as already spent.
  void start();
  /// Training seconds so far, resumed time included (what checkpoints record); time the process
  /// spent suspended (SIGSTOP ... SIGCONT) is not training (active_clock.h).
  double elapsed() const;
  /// Whether max_time is set and used up. Local to this process: the trainer agrees on it over
  /// ranks before acting (it rides in the window's stop request). Reads the clock whether or not
  /// max_time is set: called once a window, it is the reading a suspension is counted from.
  bool time_up() const;
  double max_seconds() const noexcept { return max_seconds_; }

  /// Checkpoint: the training seconds so far (train_seconds).
  void save_state(CheckpointContents& into) const;
  /// Resume: the checkpoint's training seconds count as spent.
  void load_state(const LoadedCheckpoint& from);

 private:
  int64_t max_steps_;
  double max_seconds_;
  double already_ = 0.0;
  double started_s_ = active_seconds();
};

}  // namespace tp
