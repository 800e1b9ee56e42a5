// run.trace_steps: a window of optimizer steps recorded with the PyTorch profiler (Kineto) and
// written as a Chrome trace that chrome://tracing, Perfetto and TensorBoard's profiler open
// (docs/profiling.md, "Tracing training steps"): the operators on the CPU and, on CUDA, every
// kernel and copy with its device time, CUDA-graph replays included. The window is a diagnosis,
// not a meter: recording costs host time on the traced steps (device times are unaffected).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <vector>

namespace tp {

class Logger;

class StepTrace {
 public:
  /// `steps` is run.trace_steps: empty (off) or [first, last], 1-based optimizer steps with
  /// 1 <= first <= last; anything else throws ConfigError naming the key. `records` is false on
  /// every process that writes nothing (ranks other than 0, train.fast_dev_run): there the role
  /// does nothing. The trace goes to `file` (written whole or not at all); `log` must outlive it.
  StepTrace(const std::vector<int64_t>& steps, c10::Device device, std::filesystem::path file, Logger& log,
            bool records);
  /// Stops a recording an exception left running, writing nothing.
  ~StepTrace();
  StepTrace(const StepTrace&) = delete;
  StepTrace& operator=(const StepTrace&) = delete;

  /// [main] Before optimizer step `step` (1-based): starts recording when `step` lies in the
  /// window (a run resumed inside the window records the rest of it).
  void before_step(int64_t step);
  /// [main] After optimizer step `step`: at the window's last step, waits for the device, stops
  /// and writes the trace, and logs its path and the device time per step.
  void after_step(int64_t step);
  /// [main] At the run's end (`last_step` done): writes a window the run ended inside with the
  /// steps it holds; warns when the run never reached the window.
  void finish(int64_t last_step);

 private:
  void stop_and_write(int64_t last_step);
  /// Waits for the device (nothing on the CPU).
  void synchronize() const;

  int64_t first_ = 0, last_ = 0; ///< the window; 0 = off
  int64_t started_at_ = 0;       ///< the first recorded step; 0 = not recording
  bool prepared_ = false;        ///< the tracer is started (a step before the window where there is one)
  bool written_ = false;
  c10::Device device_;
  std::filesystem::path file_;
  Logger& log_;
};

}  // namespace tp
