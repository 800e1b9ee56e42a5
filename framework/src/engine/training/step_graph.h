// The CUDA side of run.cuda_graphs (docs/cuda_graphs.md): a side stream that the training thread
// works on, one captured graph of the step, the probe that finds host syncs before a capture, and
// the sync audit of run.sync_debug. With copy_stream.cpp the only engine files that include CUDA
// headers; in a CPU build of LibTorch the graph's calls throw (the policy refuses graphs there
// first, cuda_graph_policy.h) and the probe and audit do nothing. Private to the step runner.
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <string>

#include "tp/framework/config/choices.h" // SyncDebugMode

namespace tp {

/// One captured CUDA graph of the training step, and the stream it runs on.
///
/// From construction to destruction the calling thread's current stream on `device` is a side
/// stream of its own: capture needs a stream other than the default one, and the eager warm-up
/// steps must run where the capture will (cuBLAS workspaces, the allocator's per-stream pools and
/// autograd's streams follow the current stream). Everything the trainer does meanwhile
/// (evaluation, saves, EMA) runs on that stream too, in order. The side stream starts after the
/// work queued on the default stream, and the default stream waits for it at destruction.
class StepGraph {
 public:
  explicit StepGraph(c10::Device device);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  /// [main] Captures `body`, which must queue device work only (no host read, no new CUDA stream,
  /// no allocation outside the graph's private pool that outlives it), into a new graph that
  /// replaces any earlier one. Nothing runs yet: replay() runs it. Capture mode is thread-local,
  /// so the loader's threads may keep pinning memory meanwhile. Throws tp::Error with CUDA's
  /// reason when the capture fails; LibTorch then leaves its CUDA random generator in capture
  /// state, so the process cannot train on (the caller stops the run).
  void capture(const std::function<void()>& body);
  /// [main] Runs the captured work once on the side stream (no host sync).
  void replay();
  bool captured() const noexcept;
  /// [main] Drops the graph and returns its private memory pool (to capture anew, or to stop).
  void reset();
  /// [main] Waits until the side stream's queued work is done: the auto mode's timing only.
  void synchronize();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// While the scope lasts, records the calls on this thread that make the host wait for the device
/// (LibTorch's sync check in its warning mode, the warnings kept here instead of printed): what a
/// warm-up step runs before a capture, which such a call would break. Nothing on the CPU.
class SyncProbe {
 public:
  explicit SyncProbe(c10::Device device);
  ~SyncProbe();
  SyncProbe(const SyncProbe&) = delete;
  SyncProbe& operator=(const SyncProbe&) = delete;
  /// The first such call's warning; "" when none happened.
  const std::string& first_sync() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// run.sync_debug while the scope lasts: a CUDA call that synchronises the host with the device
/// ("warn") prints a warning, ("error") throws; "off" or a CPU device does nothing. It is
/// LibTorch's own check (torch.cuda.set_sync_debug_mode), which sees the reads of tensors
/// (item(), copies to the host) and stream synchronisations.
class SyncAudit {
 public:
  SyncAudit(SyncDebugMode mode, c10::Device device);
  ~SyncAudit();
  SyncAudit(const SyncAudit&) = delete;
  SyncAudit& operator=(const SyncAudit&) = delete;

 private:
  int previous_ = -1; ///< the mode before this scope; -1 when the scope changed nothing
};

}  // namespace tp
