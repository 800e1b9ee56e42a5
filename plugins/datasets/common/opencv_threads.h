// OpenCV's thread count while image_folder instances exist.
//
// Why: Debian's OpenCV parallelises with TBB, LibTorch with OpenMP. The host already runs one
// loader worker per sample batch; if cv::resize also fanned out to every core inside each worker,
// two thread pools would fight over the same cores (ARCH-17). cv::setNumThreads is
// process-wide with the TBB backend (not per thread), so it is set to 1 when the first instance
// is created and the previous value is restored when the last one is destroyed. Cost: a single
// large resize no longer uses several cores, which only matters with data.num_workers = 0.
#pragma once

namespace tp::datasets {

/// RAII: while at least one OpenCvThreadsPin is alive, cv::getNumThreads() == 1. [main]
/// (create/destroy run on the host's main thread; a mutex makes it safe anyway).
class OpenCvThreadsPin {
 public:
  OpenCvThreadsPin();
  ~OpenCvThreadsPin();
  OpenCvThreadsPin(const OpenCvThreadsPin&) = delete;
  OpenCvThreadsPin& operator=(const OpenCvThreadsPin&) = delete;
};

}  // namespace tp::datasets
