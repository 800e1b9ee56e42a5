#include "engine/training/step_trace.h"

#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <cstdio>
#include <set>
#include <string>
#include <system_error>
#include <utility>

#include "tp/framework/error.h"
#include "tp/framework/util/log.h"
#include "tp/framework/util/short_number.h"

namespace tp {
namespace {

namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;

std::set<ActivityType> activities(c10::Device device) {
  if (device.is_cuda()) return {ActivityType::CPU, ActivityType::CUDA};
  return {ActivityType::CPU};
}

kineto::ProfilerConfig kineto_config() {
  return kineto::ProfilerConfig(torch::profiler::impl::ProfilerState::KINETO, /*report_input_shapes=*/true);
}

}  // namespace

StepTrace::StepTrace(const std::vector<int64_t>& steps, c10::Device device, std::filesystem::path file,
                     Logger& log, bool records)
    : device_(device), file_(std::move(file)), log_(log) {
  if (steps.empty()) return;
  if (steps.size() != 2 || steps[0] < 1 || steps[1] < steps[0])
    throw ConfigError("run.trace_steps",
                      "run.trace_steps must be [] (no trace) or [first, last]: the optimizer steps to record, "
                      "1-based, first <= last (e.g. [20, 22] records steps 20, 21 and 22); got " +
                          std::to_string(steps.size()) + " value(s). Fix the key in the config or --set it.");
  if (!records) return;
  first_ = steps[0];
  last_ = steps[1];
}

StepTrace::~StepTrace() {
  if (started_at_ == 0) return;
  try {
    kineto::disableProfiler();
  } catch (...) { // NOLINT(bugprone-empty-catch): leaving after an error already on its way
  }
}

void StepTrace::before_step(int64_t step) {
  if (first_ == 0 || started_at_ != 0 || written_) return;
  // torch.profiler's schedule prepares the tracer (CUPTI's start-up) one step before it records,
  // so the window's first kernels are not lost to it; so does this, when there is a step before.
  if (!prepared_ && (step == first_ - 1 || (step >= first_ && step <= last_))) {
    kineto::prepareProfiler(kineto_config(), activities(device_));
    prepared_ = true;
  }
  if (step < first_ || step > last_) return;
  // The device finishes the steps before the window first: the CPU runs ahead of it, and kernels
  // of earlier steps still running when the tracer starts would be counted in the window (a third
  // of a ResNet-50 step on an H200, bench/gpu/2026-11-27-h200-e2e-fair.md). One sync per trace.
  synchronize();
  kineto::enableProfiler(kineto_config(), activities(device_));
  started_at_ = step;
}

void StepTrace::synchronize() const {
  if (device_.type() != c10::DeviceType::CPU)
    c10::impl::VirtualGuardImpl(device_.type()).synchronizeDevice(device_.has_index() ? device_.index() : 0);
}

void StepTrace::after_step(int64_t step) {
  if (started_at_ != 0 && step >= last_) stop_and_write(step);
}

void StepTrace::finish(int64_t last_step) {
  if (started_at_ != 0) {
    stop_and_write(last_step);
  } else if (first_ != 0 && !written_) {
    log_.warn("run.trace_steps = [" + std::to_string(first_) + ", " + std::to_string(last_) +
              "]: the run ended at step " + std::to_string(last_step) +
              " without reaching those steps, so no trace was written.");
  }
}

void StepTrace::stop_and_write(int64_t last_step) {
  // Kernels still queued when the profiler stops would be missing from the trace.
  synchronize();
  const int64_t first = std::exchange(started_at_, 0);
  written_ = true;
  const std::unique_ptr<kineto::ProfilerResult> result = kineto::disableProfiler();
  double device_ns = 0;
  int64_t device_events = 0;
  for (const kineto::KinetoEvent& event : result->events()) {
    if (event.deviceType() != c10::DeviceType::CUDA) continue;
    device_ns += static_cast<double>(event.durationNs());
    ++device_events;
  }
  std::filesystem::create_directories(file_.parent_path());
  const std::filesystem::path partial = file_.string() + ".partial";
  result->save(partial.string());
  std::error_code error;
  std::filesystem::rename(partial, file_, error);
  if (error) {
    log_.warn("run.trace_steps: could not write " + file_.string() + ": " + error.message());
    return;
  }
  const int64_t steps = last_step - first + 1;
  std::string summary = "trace of steps " + std::to_string(first) + "-" + std::to_string(last_step) + " written to " +
                        file_.string();
  if (device_.is_cuda())
    summary += ": " + std::to_string(device_events / steps) + " device events and " +
               short_number(device_ns / 1e6 / static_cast<double>(steps)) + " ms of device time per step";
  log_.info(summary + " (open it in Perfetto or chrome://tracing)");
}

}  // namespace tp
