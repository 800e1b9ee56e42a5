// The training-time report: where a training step's time goes (data wait, forward, backward,
// optimizer), peak memory, samples/s and, from the FLOPs the profiler's counter measured on the
// first batch, the achieved TFLOP/s. The trainer feeds it phase boundaries; it hands back
// history values on log steps and an end-of-run summary line (docs/profiling.md).
//
// Cost of the split:
//   CPU: two steady_clock reads per phase (~50 ns), every step; no synchronisation (CPU ops
//     are synchronous, so host time is the work's time).
//   Accelerators (CUDA): host time would only measure kernel launches, so on the micro-batches
//     of each log step's window the phases are bracketed with device events (c10::Event, two
//     per phase per micro-batch) and read after the log step's loss read has synchronised the
//     device anyway. No extra sync; other steps record nothing. The split is then that of the
//     log step itself, not an average over the window.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Event.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tp {

/// The timed phases of one training step (docs/architecture.md, "The training step").
enum class StepPhase { kForward = 0, kBackward = 1, kOptimizer = 2 };

class TrainingReport {
 public:
  /// Multiplier from forward FLOPs to a training step's FLOPs: backward costs about twice the
  /// forward (a gradient for the input and one for the weights of every matmul/conv).
  static constexpr double kTrainFlopsFactor = 3.0;

  explicit TrainingReport(c10::Device device);

  /// At the first micro-batch of each optimizer step's window: `timed` says whether this window
  /// is measured with device events (accelerators: the windows of log steps). Always timed on CPU.
  void begin_window(bool timed);
  void begin(StepPhase phase);
  void end(StepPhase phase);
  /// Seconds blocked on the loader and samples in this micro-batch.
  void add_batch(double data_wait_s, int64_t samples);
  /// Forward FLOPs of one batch of `samples` (FlopCounter around the first training forward).
  void set_forward_flops(int64_t flops, int64_t samples);
  /// True once set_forward_flops was called (even if the model had no counted ops).
  bool flops_measured() const { return flops_measured_; }
  /// True when the measured FLOPs are non-zero: perf/tflops is then reported.
  bool has_flops() const { return flops_per_sample_ > 0.0; }
  double flops_per_sample() const { return flops_per_sample_; }

  /// History values of a log step, the logging window's throughput being `samples_per_s`:
  /// time/forward_s, time/backward_s, time/optimizer_s (per optimizer step, averaged over the
  /// measured steps since the last log step), memory/peak_mb and, once FLOPs are known,
  /// perf/tflops. Accelerators: reads the events, which the caller's loss read has already
  /// completed (call it after that read). Starts a new logging window.
  std::vector<std::pair<std::string, double>> log_values(double samples_per_s);

  /// One line for the end of the run: time per step and its split, samples/s, peak memory, TFLOP/s.
  std::string summary(int64_t steps, double seconds) const;

  /// What the whole run did, for to_toml(); a resumed run's totals include the processes before it.
  struct RunTotals {
    int64_t epochs = 0;         ///< epochs completed
    int64_t steps = 0;          ///< optimizer steps taken
    double train_seconds = 0.0; ///< wall time of fit(), the interrupted processes' included
  };
  /// The run directory's report.toml (`host compare` reads it, docs/experiments.md): `totals`,
  /// then what summary(steps, seconds) says as numbers, for the `steps` optimizer steps this
  /// process ran in `seconds`: ms_per_step, data_wait_ms, forward_ms, backward_ms, optimizer_ms,
  /// samples_per_s, peak_host_mb (peak RSS), on an accelerator peak_device_mb (peak allocated by
  /// tensors), and tflops once FLOPs are known. The split keys are left out when `steps` is 0.
  /// Reads the peak memory (no sync).
  std::string to_toml(const RunTotals& totals, int64_t steps, double seconds) const;

 private:
  struct Timing {
    std::chrono::steady_clock::time_point start;
    std::vector<std::pair<c10::Event, c10::Event>> events; ///< accelerator, this window
    double window_s = 0.0;
  };
  double device_seconds(Timing& timing);
  /// Milliseconds per measured step of `phase` over the run so far. On CPU the steps since the
  /// last log step count too (their host times are already summed): a run shorter than one
  /// logging window has no log step at all, and its split would otherwise read 0 (soak F6).
  /// Accelerators: the log steps only, whose events log_values() has read.
  double split_ms(StepPhase phase) const;

  c10::Device device_;
  bool timed_ = true;
  std::array<Timing, 3> phases_;
  std::array<double, 3> run_s_{};  ///< sum over measured steps
  int64_t window_measured_steps_ = 0; ///< since the last log step
  int64_t run_measured_steps_ = 0;    ///< steps whose phases were measured (CPU: all)
  double run_wait_s_ = 0.0;
  int64_t run_samples_ = 0;
  bool flops_measured_ = false;
  double flops_per_sample_ = 0.0;
};

}  // namespace tp
