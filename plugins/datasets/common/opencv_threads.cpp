#include "opencv_threads.h"

#include <mutex>

#include <opencv2/core.hpp>

namespace tp::datasets {
namespace {

// The one piece of process-wide state in this plugin, mirroring OpenCV's own process-wide
// setting: how many pins are alive and what to restore when the last one goes.
struct PinState {
  std::mutex mu;
  int count = 0;
  int saved = 0;
};

PinState& state() {
  static PinState s;
  return s;
}

}  // namespace

OpenCvThreadsPin::OpenCvThreadsPin() {
  PinState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.count++ == 0) {
    s.saved = cv::getNumThreads();
    cv::setNumThreads(1);
  }
}

OpenCvThreadsPin::~OpenCvThreadsPin() {
  PinState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (--s.count == 0) cv::setNumThreads(s.saved);
}

}  // namespace tp::datasets
