#include "tp/framework/monitor/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace tp {
namespace {

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

std::string clock_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long>(seconds + 0.5);
  char buffer[32];
  if (s >= 3600) std::snprintf(buffer, sizeof buffer, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else std::snprintf(buffer, sizeof buffer, "%ld:%02ld", s / 60, s % 60);
  return buffer;
}

}  // namespace

Progress::Progress(const std::string& mode, double every_seconds, bool enabled)
    : every_seconds_(every_seconds), loss_(std::numeric_limits<double>::quiet_NaN()) {
  if (!enabled || mode == "off") mode_ = Mode::Off;
  else if (mode == "bar") mode_ = Mode::Bar;
  else if (mode == "lines") mode_ = Mode::Lines;
  else mode_ = ::isatty(STDOUT_FILENO) ? Mode::Bar : Mode::Lines;
}

void Progress::start_task(std::string label, int64_t steps) {
  start_epoch(0, 1, steps);
  task_ = std::move(label);
}

void Progress::start_epoch(int64_t epoch, int64_t epochs, int64_t steps) {
  task_.clear();
  epoch_ = epoch;
  epochs_ = epochs;
  steps_ = steps;
  done_ = 0;
  wait_s_ = 0;
  // The loss shown belongs to this epoch: until its first logging step there is none, since the
  // last epoch's would read as this one's (epoch 3's first steps showed epoch 2's last value).
  loss_ = std::numeric_limits<double>::quiet_NaN();
  epoch_start_ = last_emit_ = std::chrono::steady_clock::now();
}

std::string Progress::render(int64_t done) const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0;
  std::string text = task_.empty() ? "epoch " + std::to_string(epoch_ + 1) + "/" + std::to_string(epochs_) + " "
                                   : task_ + " ";
  if (mode_ == Mode::Bar) {
    constexpr int kWidth = 24;
    const int filled = steps_ > 0 ? static_cast<int>(kWidth * done / steps_) : 0;
    text += "[" + std::string(filled, '=') + (filled < kWidth ? ">" : "") +
            std::string(kWidth - filled - (filled < kWidth ? 1 : 0), ' ') + "] ";
  }
  text += std::to_string(done) + "/" + std::to_string(steps_);
  if (std::isfinite(loss_)) text += " loss " + format("%.4f", loss_);
  if (task_.empty()) text += " lr " + format("%.2e", lr_);
  text += " | " + format("%.1f", rate) + " it/s";
  if (elapsed > 0) text += " wait " + format("%.0f", std::min(100.0, 100.0 * wait_s_ / elapsed)) + "%";
  text += " ETA " + clock_text(rate > 0 ? (steps_ - done) / rate : NAN);
  return text;
}

void Progress::emit(const std::string& text, bool final_line) {
  if (mode_ == Mode::Bar) {
    // \r + clear-to-end redraws one line in place; the newline comes only at the epoch's end.
    std::fprintf(stdout, "\r%s\033[K%s", text.c_str(), final_line ? "\n" : "");
    bar_open_ = !final_line;
  } else {
    std::fprintf(stdout, "%s\n", text.c_str());
  }
  std::fflush(stdout);
}

void Progress::update(int64_t done, double loss, double lr) {
  if (mode_ == Mode::Off) return;
  done_ = done;
  if (std::isfinite(loss)) loss_ = loss;
  lr_ = lr;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_emit_).count();
  // The bar redraws at most 10 times a second; lines every `every_seconds`.
  const double throttle = mode_ == Mode::Bar ? 0.1 : every_seconds_;
  if (since < throttle && done != steps_) return;
  if (mode_ == Mode::Lines && done == steps_) return; // end_epoch prints the epoch's last line
  last_emit_ = now;
  emit(render(done), false);
}

void Progress::end_epoch(const std::vector<std::pair<std::string, double>>& summary) {
  if (mode_ == Mode::Off) return;
  std::string text = render(done_);
  for (const auto& [name, value] : summary) text += " " + name + " " + format("%.4f", value);
  emit(text, true);
}

void Progress::note(const std::string& line) {
  if (mode_ == Mode::Off) return;
  if (bar_open_) std::fprintf(stdout, "\r\033[K");
  std::fprintf(stdout, "%s\n", line.c_str());
  if (bar_open_) emit(render(done_), false);
  std::fflush(stdout);
}

}  // namespace tp
