#include "step_graph.h"

#include <optional>
#include <utility>

#include "tp/framework/error.h"

#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace tp {

#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2

struct StepGraph::Impl {
  explicit Impl(c10::Device device)
      : main(c10::cuda::getCurrentCUDAStream(device.index())),
        side(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())) {
    at::cuda::CUDAEvent queued;
    queued.record(main);
    queued.block(side);
    guard.emplace(side);
  }
  ~Impl() {
    graph.reset();
    at::cuda::CUDAEvent done;
    done.record(side);
    done.block(main);
    guard.reset();
  }
  c10::cuda::CUDAStream main, side;
  std::optional<c10::cuda::CUDAStreamGuard> guard;
  std::unique_ptr<at::cuda::CUDAGraph> graph;
};

StepGraph::StepGraph(c10::Device device) {
  TP_CHECK(device.is_cuda(), "a CUDA graph of the training step needs a CUDA device, not ", device.str());
  impl_ = std::make_unique<Impl>(device);
}

StepGraph::~StepGraph() = default;

void StepGraph::capture(const std::function<void()>& body) {
  impl_->graph.reset();
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  // Thread-local: only this thread's unsafe calls (a sync, a new stream) break the capture; the
  // loader's worker threads may allocate pinned memory meanwhile. Its own private memory pool.
  graph->capture_begin(/*pool=*/{0, 0}, cudaStreamCaptureModeThreadLocal);
  try {
    body();
  } catch (const std::exception& e) {
    // Ends the stream's capture mode so the error can be reported; the run stops (see the header).
    std::string ended;
    try {
      graph->capture_end();
    } catch (const std::exception& end_error) {
      ended = std::string(" (ending the capture: ") + end_error.what() + ")";
    }
    throw Error(std::string("capturing the training step in a CUDA graph failed: ") + e.what() + ended);
  }
  try {
    graph->capture_end();
  } catch (const std::exception& e) {
    throw Error(std::string("capturing the training step in a CUDA graph failed at its end: ") + e.what());
  }
  impl_->graph = std::move(graph);
}

void StepGraph::replay() {
  TP_CHECK(impl_->graph != nullptr, "StepGraph::replay() before a capture");
  impl_->graph->replay();
}

bool StepGraph::captured() const noexcept { return impl_->graph != nullptr; }

void StepGraph::reset() { impl_->graph.reset(); }

void StepGraph::synchronize() { impl_->side.synchronize(); }

struct SyncProbe::Impl : c10::WarningHandler {
  void process(const c10::Warning& warning) override {
    if (first.empty()) first = warning.msg();
  }
  std::string first;
  int previous = -1;
  std::optional<c10::WarningUtils::WarningHandlerGuard> guard;
};

SyncProbe::SyncProbe(c10::Device device) : impl_(std::make_unique<Impl>()) {
  if (!device.is_cuda()) return;
  auto& state = c10::cuda::warning_state();
  impl_->previous = static_cast<int>(state.get_sync_debug_mode());
  state.set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
  impl_->guard.emplace(impl_.get());
}

SyncProbe::~SyncProbe() {
  if (impl_->previous < 0) return;
  impl_->guard.reset();
  c10::cuda::warning_state().set_sync_debug_mode(static_cast<c10::cuda::SyncDebugMode>(impl_->previous));
}

const std::string& SyncProbe::first_sync() const noexcept { return impl_->first; }

SyncAudit::SyncAudit(SyncDebugMode mode, c10::Device device) {
  if (mode == SyncDebugMode::kOff || !device.is_cuda()) return;
  auto& state = c10::cuda::warning_state();
  previous_ = static_cast<int>(state.get_sync_debug_mode());
  state.set_sync_debug_mode(mode == SyncDebugMode::kError ? c10::cuda::SyncDebugMode::L_ERROR
                                                          : c10::cuda::SyncDebugMode::L_WARN);
}

SyncAudit::~SyncAudit() {
  if (previous_ >= 0) c10::cuda::warning_state().set_sync_debug_mode(static_cast<c10::cuda::SyncDebugMode>(previous_));
}

#else  // a CPU build of LibTorch: no CUDA graphs (cuda_graph_policy.cpp refuses them before this)

struct StepGraph::Impl {};

StepGraph::StepGraph(c10::Device device) {
  throw Error("a CUDA graph of the training step needs a CUDA build of LibTorch; this host has a CPU one (device " +
              device.str() + ")");
}
StepGraph::~StepGraph() = default;
void StepGraph::capture(const std::function<void()>&) {}
void StepGraph::replay() {}
bool StepGraph::captured() const noexcept { return false; }
void StepGraph::reset() {}
void StepGraph::synchronize() {}

struct SyncProbe::Impl {
  std::string first;
};
SyncProbe::SyncProbe(c10::Device) : impl_(std::make_unique<Impl>()) {}
SyncProbe::~SyncProbe() = default;
const std::string& SyncProbe::first_sync() const noexcept { return impl_->first; }

SyncAudit::SyncAudit(SyncDebugMode, c10::Device) {}
SyncAudit::~SyncAudit() = default;

#endif

}  // namespace tp
