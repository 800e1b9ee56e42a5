#include "step_capture.h"

#include <ATen/ATen.h>
#include <toml++/toml.h>

#include <sstream>
#include <utility>

#include "tp/framework/error.h"
#include "tp/framework/util/short_number.h"

namespace tp {
namespace {

bool same_shapes(const std::vector<NamedTensors>& a, const std::vector<NamedTensors>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return false;
    for (std::size_t j = 0; j < a[i].size(); ++j) {
      const at::Tensor& x = a[i][j].second;
      const at::Tensor& y = b[i][j].second;
      if (a[i][j].first != b[i][j].first || x.sizes() != y.sizes() || x.scalar_type() != y.scalar_type() ||
          x.device() != y.device())
        return false;
    }
  }
  return true;
}

double elapsed_ms(std::chrono::steady_clock::time_point since, int64_t steps) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count() /
         static_cast<double>(steps);
}

}  // namespace

StepCapture::StepCapture(CudaGraphMode mode, c10::Device device, Logger& log) : mode_(mode), log_(log), graph_(device) {}

void StepCapture::before_step() {
  if (mode_ != CudaGraphMode::kAuto || disabled_) return;
  // The eager side: the steps after the warm-up; the graph side: the replays after the one that
  // followed the capture. Each side's figure is the host time between two device syncs taken at
  // step starts, over kTimedSteps whole steps (fetch, copy, work, bookkeeping).
  const bool eager_timing = !graph_.captured() && eager_ms_ == 0.0;
  const bool graph_timing = graph_.captured() && graph_ms_ == 0.0;
  if (eager_timing && eager_steps_ == kWarmupSteps) {
    graph_.synchronize();
    timing_start_ = std::chrono::steady_clock::now();
  } else if (eager_timing && eager_steps_ == kWarmupSteps + kTimedSteps && timing_start_) {
    graph_.synchronize();
    eager_ms_ = elapsed_ms(*timing_start_, kTimedSteps);
    timing_start_.reset();
  } else if (graph_timing && replays_ == 1) {
    graph_.synchronize();
    timing_start_ = std::chrono::steady_clock::now();
  } else if (graph_timing && replays_ == 1 + kTimedSteps && timing_start_) {
    graph_.synchronize();
    graph_ms_ = elapsed_ms(*timing_start_, kTimedSteps);
    timing_start_.reset();
    const std::string figures =
        short_number(graph_ms_) + " ms per graphed step against " + short_number(eager_ms_) + " ms eager";
    if (graph_ms_ < eager_ms_) {
      report("graphed: " + figures);
    } else {
      drop_graph();
      report("eager: " + figures + ", so the graph was dropped");
    }
  }
}

StepCapture::Use StepCapture::use_for(const std::vector<NamedTensors>& window, bool complete, int64_t length,
                                      int64_t full_length, bool update_ready) {
  if (disabled_ || !complete || length != full_length) return Use::kEager;
  for (const auto& micro : window)
    if (micro.empty()) return Use::kEager; // every sample skipped: no shape to replay
  if (graph_.captured()) return same_shapes(window, static_) ? Use::kReplay : Use::kEager;
  if (eager_steps_ < eager_steps_before_capture()) return Use::kEager;
  if (!host_sync_.empty() && mode_ == CudaGraphMode::kAuto) {
    // "on" captures anyway (a failure then names the call, capture_failure_hint()).
    give_up("a warm-up step waited for the device inside the phases a graph would capture (\"" + host_sync_ +
            "\"): a host read of a tensor in the model or the loss (PLG-11), which a replay would skip");
    return Use::kEager;
  }
  if (!update_ready && !waiting_logged_) {
    // fp16 with SGD momentum: the first momentum step is decided on the host, and overflowing
    // early steps are skipped before it; the capture waits for it.
    waiting_logged_ = true;
    report("warming up until the update can run on the device alone (under fp16, SGD's first momentum update "
           "is decided on the host once)");
  }
  return update_ready ? Use::kCapture : Use::kEager;
}

bool StepCapture::probing() const noexcept {
  // The warm-up's last step and any after it: the first steps make one-off host reads (lazy
  // initialisation, a resumed run's restored sums) that a capture of a later step never sees.
  return !disabled_ && !graph_.captured() && eager_steps_ + 1 >= eager_steps_before_capture();
}

int64_t StepCapture::eager_steps_before_capture() const noexcept {
  return kWarmupSteps + (mode_ == CudaGraphMode::kAuto && eager_ms_ == 0.0 ? kTimedSteps : 0);
}

void StepCapture::drop_graph() {
  graph_.reset();
  static_.clear();
  disabled_ = true;
}

std::string StepCapture::capture_failure_hint() const {
  return host_sync_.empty() ? "" : " The warm-up's last step waited for the device (\"" + host_sync_ +
                                   "\"): a host read of a tensor in the model or the loss (PLG-11) breaks a capture.";
}

void StepCapture::record_host_sync(const std::string& what) {
  if (host_sync_.empty()) host_sync_ = what;
}

void StepCapture::eager_step_done() { ++eager_steps_; }

void StepCapture::capture(const std::vector<NamedTensors>& window,
                          const std::function<void(const std::vector<NamedTensors>&)>& body) {
  // The static buffers are ordinary allocations made before the capture, so they outlive every
  // replay; clone() keeps each field's memory format (channels-last inputs stay channels-last).
  static_.clear();
  for (const auto& micro : window) {
    NamedTensors copy;
    for (const auto& [name, tensor] : micro) copy.emplace_back(name, tensor.clone());
    static_.push_back(std::move(copy));
  }
  graph_.capture([&] { body(static_); });
  replays_ = 0;
  if (mode_ == CudaGraphMode::kOn) report("graphed: captured after " + std::to_string(eager_steps_) + " eager steps");
  else report("timing: captured after " + std::to_string(eager_steps_) + " eager steps");
}

void StepCapture::give_up(const std::string& why) {
  drop_graph();
  log_.warn("run.cuda_graphs = \"auto\": " + why + "; training eagerly");
  report("eager: " + why);
}

void StepCapture::replay(const std::vector<NamedTensors>& window) {
  for (std::size_t i = 0; i < window.size(); ++i)
    for (std::size_t j = 0; j < window[i].size(); ++j) static_[i][j].second.copy_(window[i][j].second);
  graph_.replay();
  ++replays_;
}

void StepCapture::invalidate() {
  if (!graph_.captured() && eager_steps_ == 0) return;
  graph_.reset();
  static_.clear();
  eager_steps_ = 0;
  replays_ = 0;
  if (!disabled_) report("warming up again: the trainable parameters changed");
}

bool StepCapture::audit_exempt() const noexcept {
  if (disabled_) return false;
  return !graph_.captured() || (mode_ == CudaGraphMode::kAuto && graph_ms_ == 0.0);
}

std::string StepCapture::runtime_table() const {
  return cuda_graphs_table(std::string(to_string(mode_)), graph_.captured() && !disabled_, state_,
                           eager_ms_, graph_ms_);
}

bool StepCapture::take_report_change() noexcept { return std::exchange(changed_, false); }

void StepCapture::report(const std::string& why) {
  state_ = why;
  changed_ = true;
  log_.info("run.cuda_graphs = \"" + std::string(to_string(mode_)) + "\": " + why);
}

std::string cuda_graphs_table(const std::string& mode, bool graphed, const std::string& state, double eager_ms,
                              double graph_ms) {
  std::ostringstream text;
  // toml++ writes the strings, quoted and escaped as TOML wants whatever they hold.
  text << "[cuda_graphs]\n"
       << "mode = " << toml::value<std::string>(mode) << "\n"
       << "graphed = " << (graphed ? "true" : "false") << "\n"
       << "state = " << toml::value<std::string>(state) << "\n";
  if (eager_ms > 0) text << "eager_step_ms = " << eager_ms << "\n";
  if (graph_ms > 0) text << "graph_step_ms = " << graph_ms << "\n";
  return text.str();
}

}  // namespace tp
