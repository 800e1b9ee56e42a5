#include "tp/framework/profile/training_report.h"

#include <c10/core/impl/VirtualGuardImpl.h>

#include <cmath>
#include <cstdio>

#include "device_index.h"
#include "tp/framework/monitor/history.h"
#include "tp/framework/profile/memory.h"

namespace tp {
namespace {

constexpr std::size_t index(StepPhase phase) { return static_cast<std::size_t>(phase); }

}  // namespace

TrainingReport::TrainingReport(c10::Device device) : device_(detail::concrete_device(device)) {}

void TrainingReport::begin_window(bool timed) {
  timed_ = device_.is_cpu() || timed;
  if (timed_) ++window_measured_steps_;
}

void TrainingReport::begin(StepPhase phase) {
  if (!timed_) return;
  Timing& t = phases_[index(phase)];
  if (device_.is_cpu()) {
    t.start = std::chrono::steady_clock::now();
    return;
  }
  // Recorded on the current stream, where the step's kernels go; completes without a sync.
  const c10::Stream stream = c10::impl::VirtualGuardImpl(device_.type()).getStream(device_);
  t.events.emplace_back(c10::Event(device_.type(), c10::EventFlag::BACKEND_DEFAULT),
                        c10::Event(device_.type(), c10::EventFlag::BACKEND_DEFAULT));
  t.events.back().first.record(stream);
}

void TrainingReport::end(StepPhase phase) {
  if (!timed_) return;
  Timing& t = phases_[index(phase)];
  if (device_.is_cpu()) {
    t.window_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t.start).count();
    return;
  }
  const c10::Stream stream = c10::impl::VirtualGuardImpl(device_.type()).getStream(device_);
  t.events.back().second.record(stream);
}

void TrainingReport::add_batch(double data_wait_s, int64_t samples) {
  run_wait_s_ += data_wait_s;
  run_samples_ += samples;
}

void TrainingReport::set_forward_flops(int64_t flops, int64_t samples) {
  flops_measured_ = true;
  if (samples > 0) flops_per_sample_ = static_cast<double>(flops) / static_cast<double>(samples);
}

double TrainingReport::device_seconds(Timing& timing) {
  double seconds = timing.window_s;
  // The log step's loss read synchronised the device, so every event here has completed;
  // synchronize() is a formality that costs nothing then.
  for (auto& [start, stop] : timing.events) {
    stop.synchronize();
    seconds += start.elapsedTime(stop) / 1000.0;
  }
  timing.events.clear();
  timing.window_s = 0.0;
  return seconds;
}

std::vector<std::pair<std::string, double>> TrainingReport::log_values(double samples_per_s) {
  static constexpr const char* kNames[] = {"time/forward_s", "time/backward_s", "time/optimizer_s"};
  std::vector<std::pair<std::string, double>> values;
  const double measured = static_cast<double>(std::max<int64_t>(1, window_measured_steps_));
  for (std::size_t i = 0; i < phases_.size(); ++i) {
    const double seconds = device_seconds(phases_[i]);
    run_s_[i] += seconds;
    values.emplace_back(kNames[i], seconds / measured);
  }
  run_measured_steps_ += window_measured_steps_;
  window_measured_steps_ = 0;
  values.emplace_back("memory/peak_mb", peak_memory_mb(device_));
  if (has_flops()) values.emplace_back("perf/tflops", flops_per_sample_ * samples_per_s * kTrainFlopsFactor / 1e12);
  return values;
}

double TrainingReport::split_ms(StepPhase phase) const {
  double seconds = run_s_[index(phase)];
  int64_t steps = run_measured_steps_;
  if (device_.is_cpu()) {
    seconds += phases_[index(phase)].window_s;
    steps += window_measured_steps_;
  }
  return 1e3 * seconds / static_cast<double>(std::max<int64_t>(1, steps));
}

std::string TrainingReport::summary(int64_t steps, double seconds) const {
  const double per_step = steps > 0 ? seconds / static_cast<double>(steps) : 0.0;
  const double samples_per_s = seconds > 0 ? static_cast<double>(run_samples_) / seconds : 0.0;
  char line[512];
  std::snprintf(line, sizeof line,
                "training report: %.1f ms/step (data wait %.1f, forward %.1f, backward %.1f, optimizer %.1f ms%s), "
                "%.1f samples/s, peak memory %.0f MB (%s)",
                1e3 * per_step, steps > 0 ? 1e3 * run_wait_s_ / static_cast<double>(steps) : 0.0,
                split_ms(StepPhase::kForward), split_ms(StepPhase::kBackward), split_ms(StepPhase::kOptimizer),
                device_.is_cpu() ? "" : "; device time of the log steps", samples_per_s, peak_memory_mb(device_),
                device_.is_cpu() ? "process peak RSS" : "peak allocated by tensors");
  std::string out = line;
  if (has_flops()) {
    std::snprintf(line, sizeof line, ", %.3g TFLOP/s (%.3g GFLOPs forward per sample x 3 x samples/s)",
                  flops_per_sample_ * samples_per_s * kTrainFlopsFactor / 1e12, flops_per_sample_ / 1e9);
    out += line;
  }
  return out;
}

std::string TrainingReport::to_toml(const RunTotals& totals, int64_t steps, double seconds) const {
  // The shortest text that reads back as the same double; TOML's nan for a value that is not one.
  const auto number = [](double value) -> std::string { return std::isfinite(value) ? format_number(value) : "nan"; };
  std::string out =
      "# The training report of this run (written at the end of training; docs/experiments.md).\n"
      "# The totals cover the whole run; the split and throughput cover the steps of the last process\n"
      "# (measured_steps), which after a resume are only the steps it ran. ms_per_step and samples_per_s\n"
      "# are over measured_seconds, the whole fit (evaluation, checkpoints and plots included);\n"
      "# data_wait_ms, forward_ms, backward_ms and optimizer_ms are the training step alone.\n";
  out += "epochs = " + std::to_string(totals.epochs) + "\n";
  out += "steps = " + std::to_string(totals.steps) + "\n";
  out += "train_seconds = " + number(totals.train_seconds) + "\n";
  out += "device = \"" + device_.str() + "\"\n";
  out += "measured_steps = " + std::to_string(steps) + "\n";
  out += "measured_seconds = " + number(seconds) + "\n";
  if (steps > 0) {
    const double n = static_cast<double>(steps);
    out += "ms_per_step = " + number(1e3 * seconds / n) + "\n";
    out += "data_wait_ms = " + number(1e3 * run_wait_s_ / n) + "\n";
    out += "forward_ms = " + number(split_ms(StepPhase::kForward)) + "\n";
    out += "backward_ms = " + number(split_ms(StepPhase::kBackward)) + "\n";
    out += "optimizer_ms = " + number(split_ms(StepPhase::kOptimizer)) + "\n";
    if (seconds > 0) out += "samples_per_s = " + number(static_cast<double>(run_samples_) / seconds) + "\n";
    if (has_flops() && seconds > 0)
      out += "tflops = " +
             number(flops_per_sample_ * static_cast<double>(run_samples_) / seconds * kTrainFlopsFactor / 1e12) +
             "\n";
  }
  out += "peak_host_mb = " + number(peak_memory_mb(c10::Device(c10::DeviceType::CPU))) + "\n";
  if (!device_.is_cpu()) out += "peak_device_mb = " + number(peak_memory_mb(device_)) + "\n";
  if (!device_.is_cpu()) out += "device_total_mb = " + number(device_total_memory_mb(device_)) + "\n";
  return out;
}

}  // namespace tp
