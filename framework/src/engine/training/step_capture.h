// run.cuda_graphs' bookkeeping for the step runner (docs/cuda_graphs.md): the eager warm-up, the
// static input buffers a graph reads, when a window can replay, and under "auto" the timed
// comparison that keeps the graph only when it is faster. The step runner owns the step's phases;
// this owns only what a capture needs besides them. Private to the step runner.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "step_graph.h"
#include "tp/framework/data/named_tensors.h"
#include "engine/training/cuda_graph_policy.h"
#include "tp/framework/util/log.h"

namespace tp {

class StepCapture {
 public:
  /// Eager steps before the capture: cuDNN/cuBLAS choose and allocate their workspaces, the
  /// optimizer makes its state, autograd and the allocator settle, all on the capture's stream.
  static constexpr int64_t kWarmupSteps = 3;
  /// "auto": steps timed on each side before the choice.
  static constexpr int64_t kTimedSteps = 5;

  /// What the step runner does with a window.
  enum class Use { kEager, kCapture, kReplay };

  /// `mode` is kOn or kAuto, and the policy allowed the run (cuda_graph_policy.h).
  StepCapture(CudaGraphMode mode, c10::Device device, Logger& log);

  /// [main] At the start of every optimizer step, before anything is fetched: under "auto" the
  /// timing's host syncs and the choice (outside the step's sync audit).
  void before_step();
  /// [main] What to do with a fetched window: `complete` (the loader did not run dry),
  /// `length` micro-batches of a window of `full_length`, `update_ready` (the update is device
  /// work only and no gradient is left from an earlier window: what a capture assumes). Anything
  /// a graph cannot replay is kEager. Under "auto" a warm-up step that waited for the device
  /// (record_host_sync) rules the capture out and the run trains eagerly from then on; "on"
  /// captures anyway and a failure names the call (capture_failure_hint()).
  Use use_for(const std::vector<NamedTensors>& window, bool complete, int64_t length, int64_t full_length,
              bool update_ready);
  /// Whether this eager step should be probed for host syncs (SyncProbe): the warm-up's last
  /// step and any later one before the capture.
  bool probing() const noexcept;
  /// What a failed capture's error adds: the host sync a probed warm-up step saw ("" when none).
  std::string capture_failure_hint() const;
  /// [main] A warm-up step's phases waited for the device (`what`: LibTorch's warning).
  void record_host_sync(const std::string& what);
  /// [main] A step ran eagerly (kEager): counts the warm-up.
  void eager_step_done();
  /// [main] Captures `body` over static copies of `window` (the buffers every replay reads),
  /// then counts on replays. Throws tp::Error when the capture fails.
  void capture(const std::vector<NamedTensors>& window, const std::function<void(const std::vector<NamedTensors>&)>& body);
  /// [main] Copies `window` into the static buffers (device to device, on the step's stream) and replays.
  void replay(const std::vector<NamedTensors>& window);
  /// [main] The trainable parameters or the optimizer's state changed (a frozen group joined, a
  /// checkpoint was loaded): warm up and capture anew.
  void invalidate();

  /// Whether this step must not be audited (run.sync_debug): the warm-up, the capture and the
  /// timing steps decide or read on the host by design.
  bool audit_exempt() const noexcept;
  /// runtime.toml's [cuda_graphs] table: mode, whether steps replay a graph, why, timings.
  std::string runtime_table() const;
  /// True once after each change of what runtime_table() says (the trainer rewrites runtime.toml).
  bool take_report_change() noexcept;

 private:
  /// Eager steps the run takes before it captures: the warm-up, and under "auto" the timed ones.
  int64_t eager_steps_before_capture() const noexcept;
  /// Under "auto": no graph any more, every later step eager.
  void drop_graph();
  /// drop_graph(), logging and reporting `why`.
  void give_up(const std::string& why);
  void report(const std::string& why);

  CudaGraphMode mode_;
  Logger& log_;
  StepGraph graph_;
  std::vector<NamedTensors> static_; ///< the captured step's inputs; replays copy each window here
  int64_t eager_steps_ = 0;          ///< eager steps since the start or the last invalidate()
  int64_t replays_ = 0;              ///< replays of the current graph
  bool disabled_ = false;            ///< "auto" chose eager (slower, or a warm-up step synced)
  std::string host_sync_;            ///< the first host sync a probed warm-up step made
  bool waiting_logged_ = false;      ///< the warm-up outlasted kWarmupSteps and said why
  /* "auto": the timing (host clock between device syncs at step starts) */
  std::optional<std::chrono::steady_clock::time_point> timing_start_;
  double eager_ms_ = 0.0, graph_ms_ = 0.0;
  std::string state_ = "warming up"; ///< what runtime_table() reports
  bool changed_ = true;
};

/// runtime.toml's [cuda_graphs] table: `mode`, `graphed`, `state` (TOML-quoted here), and the
/// timings when positive.
std::string cuda_graphs_table(const std::string& mode, bool graphed, const std::string& state, double eager_ms = 0,
                              double graph_ms = 0);

}  // namespace tp
