// Progress on stdout, rank 0 only (ARCH-14): one live bar redrawn in place when
// stdout is a terminal; plain lines every `every_seconds` otherwise (CI, SLURM logs).
//   epoch 3/10 [=========>          ] 120/188 loss 0.1234 lr 1.00e-03 | 45.2 it/s wait 12% ETA 0:02
// `loss` is the train/loss of the epoch's latest logging step (train.log_every_steps; reading it
// syncs the device), as history.jsonl has it: absent before the epoch's first one, never an
// earlier epoch's. The epoch's last line adds its mean, train/loss.
// `wait` is the share of the epoch's wall time so far that the training loop spent blocked on the
// data loader (the time/data_wait_s meter): near 0% the loader keeps up; a high value means more
// data.num_workers, a cheaper dataset transform, or a faster disk.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tp {

class Progress {
 public:
  /// `mode` is "auto" | "bar" | "lines" | "off"; `enabled` false on ranks other than 0.
  Progress(const std::string& mode, double every_seconds, bool enabled);
  /// Starts an epoch of `steps` optimizer steps (epoch is 0-based; shown 1-based).
  void start_epoch(int64_t epoch, int64_t epochs, int64_t steps);
  /// Starts a pass of `steps` that is not a training epoch ("predict"): shown as `label` instead
  /// of the epoch, without the lr. Ended by end_epoch() as an epoch is.
  void start_task(std::string label, int64_t steps);
  /// After step `done` (1-based) of the epoch. `loss` is NaN when it was not read this step
  /// (reading it syncs the device); this epoch's last read value is shown then, or none before
  /// its first (start_epoch() forgets the previous epoch's).
  void update(int64_t done, double loss, double lr);
  /// Adds `seconds` the training loop waited for the loader (per batch, before update()); shown
  /// as `wait N%` of the epoch's elapsed time. Reset by start_epoch().
  void add_data_wait(double seconds) { wait_s_ += seconds; }
  /// Ends the epoch's bar with its summary values ("val/accuracy" ...).
  void end_epoch(const std::vector<std::pair<std::string, double>>& summary);
  /// A free-form line that does not break the bar (printed above it).
  void note(const std::string& line);

 private:
  std::string render(int64_t done) const;
  void emit(const std::string& text, bool final_line);

  enum class Mode { Bar, Lines, Off } mode_;
  double every_seconds_;
  int64_t epoch_ = 0, epochs_ = 0, steps_ = 0, done_ = 0;
  double loss_, lr_ = 0;
  double wait_s_ = 0;  // seconds blocked on the loader this epoch
  std::string task_;   // start_task's label; empty during training epochs
  std::chrono::steady_clock::time_point epoch_start_, last_emit_;
  bool bar_open_ = false;
};

}  // namespace tp
