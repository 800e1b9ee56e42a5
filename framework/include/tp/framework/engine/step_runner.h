// One micro-batch and, at the end of its accumulation window, one optimizer update: autocast and
// the grad scaler (AMP), the window's exact loss normalisation, the non-finite-loss policy,
// clipping, the update, and the data-parallel gradient all-reduce with the per-window agreement
// of the ranks. The Trainer owns the loop and the schedule; this owns what happens inside a step,
// so a feature of the step itself (EMA of the weights after the update, CUDA-graph capture of
// forward/backward) lands here.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tp/framework/amp/grad_scaler.h"
#include "tp/framework/amp/precision.h"
#include "tp/framework/config/run_config.h"
#include "tp/framework/engine/batch_placement.h"
#include "tp/framework/engine/nan_policy.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/engine/train_meters.h"
#include "tp/framework/optim/optimizer_factory.h"
#include "tp/framework/util/log.h"

namespace tp {

class DistContext;
class GradSync;

/// Where a micro-batch sits in its gradient-accumulation window.
struct AccumulationWindow {
  int64_t length; ///< micro-batches in this window (the epoch's last one may be short)
  bool first;
  bool last;
};

/// Where the loop is, for messages: optimizer steps taken, 0-based epoch, next batch index.
struct StepPosition {
  int64_t step;
  int64_t epoch;
  int64_t batch;
};

/// What the ranks agreed at a window's end (the identity for a single process).
struct WindowAgreement {
  uint32_t requests = 0; ///< deferred callback requests (TP_REQUEST_*), ORed over ranks
  int signal = 0;        ///< data-parallel: a stop signal some rank saw (0 = none)
};

class StepRunner {
 public:
  /// Every reference must outlive the runner; `optim` and `model_state` may still be empty here
  /// (the Trainer fills them before the first step). `dist` null = a single process.
  StepRunner(const RunConfig& config, RunComponents& parts, const std::vector<StateTensor>& model_state,
             BuiltOptimizer& optim, const BatchPlacement& placement, TrainMeters& meters, Logger& log,
             DistContext* dist);
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  /// [all ranks] Data-parallel only: registers the gradient all-reduce on the trainable
  /// parameters of the placed model (a collective shape check) and logs the buckets.
  void start_data_parallel();
  /// [all ranks] Trains one micro-batch. An empty `cpu_batch` (every sample skipped) runs no
  /// forward; on a window's last micro-batch it still joins the gradient all-reduce with zero
  /// gradient and zero items. On the last micro-batch: agrees with the other ranks (item count,
  /// non-finite loss, stop signal, `deferred` requests: one all-reduce), then updates the
  /// weights unless the window was poisoned (nan_policy = "skip") or had no item at all; the
  /// caller then advances the schedule and the step count either way. Throws tp::Error for a
  /// non-finite loss under nan_policy = "stop" (data-parallel: on every rank at once).
  WindowAgreement train_step(NamedTensors& cpu_batch, const AccumulationWindow& window, const StepPosition& at,
                             uint32_t deferred);
  /// Throws tp::Error under nan_policy = "stop" when `sum`, a training loss the host read for
  /// steps `span` ("between steps 3 and 5"), is non-finite. Non-fp16 only (nan_policy.h).
  void check_read_loss(double sum, const std::string& span) const;
  /// True for a non-finite `sum` that check_read_loss() would throw for.
  bool read_check_fails(double sum) const;

  Precision precision() const noexcept { return precision_; }
  /// The fp16 grad scaler (disabled otherwise): its scale and growth tracker are checkpointed.
  GradScaler& scaler() noexcept { return scaler_; }
  const GradScaler& scaler() const noexcept { return scaler_; }
  /// Optimizer steps skipped for a non-finite loss (nan_policy = "skip").
  int64_t skipped_steps() const noexcept { return skipped_steps_; }

 private:
  /* Phases of train_step */
  void begin_micro_batch(const AccumulationWindow& window, int64_t step);
  LossTerms forward(const NamedTensors& batch);
  at::Tensor normalised_loss(const LossTerms& terms, const AccumulationWindow& window);
  void check_finite(const at::Tensor& sum, const StepPosition& at);
  void backward(const at::Tensor& loss, const AccumulationWindow& window);
  void join_all_reduce(const AccumulationWindow& window);
  WindowAgreement agree_on_window(uint32_t deferred, const StepPosition& at);
  void update();
  /// dist.broadcast_buffers: rank 0's buffers (BatchNorm statistics) to all ranks, before a
  /// window's first forward, as Python's DDP does. Nothing for a model without buffers.
  void sync_buffers();

  const RunConfig& config_;
  RunComponents& parts_;
  const std::vector<StateTensor>& model_state_;
  BuiltOptimizer& optim_;
  const BatchPlacement& placement_;
  TrainMeters& meters_;
  Logger& log_;
  DistContext* dist_;
  std::unique_ptr<GradSync> grad_sync_; ///< data-parallel only
  Precision precision_;
  GradScaler scaler_;
  NanChecks nan_checks_;
  at::Tensor window_estimate_, window_items_; ///< loss normaliser of the current window, on device
  at::Tensor correction_;        ///< data-parallel: the window's gradient correction (agree_on_window)
  int64_t window_batches_ = 0;   ///< non-empty micro-batches in this window so far
  bool window_poisoned_ = false; ///< this window saw a non-finite loss
  bool window_empty_ = false;    ///< no item in the window on any rank: no update
  int64_t skipped_steps_ = 0;
};

}  // namespace tp
