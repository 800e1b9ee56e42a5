// The training meters: the loss summed on the device (read on the host only at logging steps,
// epoch ends and checkpoints, each read a sync point on CUDA), the throughput and data-wait
// clocks, and the step-time report (docs/profiling.md). Data-parallel reads are sums over ranks.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "tp/framework/engine/scalars.h"
#include "tp/framework/profile/training_report.h"

namespace tp {

class DistContext;

class TrainMeters {
 public:
  /// `dist` (null = a single process) must outlive the meters.
  TrainMeters(c10::Device device, DistContext* dist);

  /* Loss: device accumulators of (sum of item losses, item count) */
  /// [main] Adds one micro-batch's loss sum and item count (double scalars on the device).
  void add_loss(const at::Tensor& sum, const at::Tensor& items);
  /// [all ranks] The logging window's (loss sum, item count) over all ranks, then resets it.
  /// Sync point on CUDA; data-parallel, one small all-reduce.
  std::pair<double, double> read_window_loss();
  /// [all ranks] Same for the epoch's accumulators.
  std::pair<double, double> read_epoch_loss();

  /* Throughput: wall clocks, data wait and samples, per logging window and per epoch */
  /// [main] Restarts the epoch's and the window's clocks and counts.
  void start_epoch();
  /// [main] One micro-batch fetched after waiting `wait_s` seconds for it.
  void add_batch(double wait_s, int64_t samples);
  /// [main] One optimizer step ended.
  void count_step() noexcept { ++window_steps_; }
  /// [main] The logging window's time/step_s, time/data_wait_s, throughput/samples_per_s and
  /// the report's step split, peak memory and TFLOP/s; restarts the window. Call right after
  /// read_window_loss(), whose sync makes the wall time include the device work.
  Scalars read_window_throughput();
  /// The epoch so far: wall seconds, seconds waiting for data, samples.
  struct EpochClock {
    double seconds = 0.0;
    double wait_s = 0.0;
    int64_t samples = 0;
  };
  EpochClock epoch_clock() const;

  /* Checkpoints: the running sums travel with the position */
  /// [main] {epoch sum, epoch count, window sum, window count}. Sync point on CUDA.
  std::vector<double> running_loss() const;
  /// [main] Restores running_loss(); `holder` false (ranks other than 0) keeps zeros, since the
  /// checkpoint holds the global sums and rank 0 carries them on.
  void load_running_loss(const std::vector<double>& values, bool holder);
  /// [all ranks] Sums the accumulators into rank 0's (others zero), so a checkpoint holds the
  /// global values and later sums stay right. No-op for a single process.
  void gather_running_loss();

  /// The step-time report the step runner times its phases in.
  TrainingReport& report() noexcept { return report_; }
  const TrainingReport& report() const noexcept { return report_; }

 private:
  std::pair<double, double> global_sums(const at::Tensor& sum, const at::Tensor& count);

  DistContext* dist_;
  at::Tensor window_loss_sum_, window_count_; ///< since the last log step, on device (no sync)
  at::Tensor epoch_loss_sum_, epoch_count_;
  double window_wait_s_ = 0.0, epoch_wait_s_ = 0.0;
  int64_t window_samples_ = 0, epoch_samples_ = 0, window_steps_ = 0;
  std::chrono::steady_clock::time_point window_start_, epoch_start_;
  TrainingReport report_;
};

}  // namespace tp
