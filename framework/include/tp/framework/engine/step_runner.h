// One micro-batch and, at the end of its accumulation window, one optimizer update: autocast and
// the grad scaler (AMP), the window's exact loss normalisation, the non-finite-loss policy,
// clipping, the update, and the data-parallel gradient all-reduce with the per-window agreement
// of the ranks. The Trainer owns the loop and the schedule; this owns what happens inside a step,
// so a feature of the step itself (EMA of the weights after the update, CUDA-graph capture of
// forward/backward) lands here.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <limits>
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

/// A request of the host's own beside the callbacks' TP_REQUEST_* bits: train.max_time is used up
/// on some rank. It is agreed over ranks with them (ORed in the window's all-reduce).
inline constexpr uint32_t kRequestBudgetStop = 1u << 16;

/// What the ranks agreed at a window's end (the identity for a single process).
struct WindowAgreement {
  uint32_t requests = 0; ///< deferred requests (TP_REQUEST_*, kRequestBudgetStop), ORed over ranks
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
  /// Pieces each micro-batch is cut into (train.on_oom = "split" doubles it after an
  /// out-of-memory error; 1 otherwise). Checkpointed, so a resumed run starts with the pieces that fit.
  int64_t micro_batch_splits() const noexcept { return splits_; }
  /// Resume: the pieces of the checkpoint (>= 1).
  void set_micro_batch_splits(int64_t splits);

  /// What a logging step records about the updates since the previous one (history keys in
  /// brackets). Reading it is a host sync; it restarts the window.
  struct UpdateStats {
    double grad_norm = std::numeric_limits<double>::quiet_NaN(); ///< [train/grad_norm] the logged step's global
                                                                    ///< gradient norm before clipping (NaN: none measured)
    double clipped_fraction = 0;  ///< [train/clipped_fraction] steps whose norm exceeded train.max_grad_norm
    double scale = 0;             ///< [amp/scale] the fp16 grad scaler's scale (fp16 only)
    int64_t scaler_skipped = 0;   ///< [amp/skipped_steps] steps the fp16 scaler skipped, whole run
  };
  /// [all ranks] The stats of the logging window (the same on every rank: gradients are all-reduced).
  UpdateStats read_update_stats();

 private:
  /* Phases of train_step */
  void begin_micro_batch(const AccumulationWindow& window, int64_t step);
  /// 2-3 for each piece of the placed micro-batch (the whole batch unless it was split).
  void train_pieces(const NamedTensors& batch, const AccumulationWindow& window, const StepPosition& at);
  /// 2-3 for one piece: forward, the normalised loss, the non-finite check, backward (which
  /// all-reduces when `sync`), then its items and loss are counted.
  void train_piece(const NamedTensors& piece, const AccumulationWindow& window, bool sync, const StepPosition& at);
  LossTerms forward(const NamedTensors& batch);
  at::Tensor normalised_loss(const LossTerms& terms, const AccumulationWindow& window);
  void check_finite(const at::Tensor& sum, const StepPosition& at);
  void backward(const at::Tensor& loss, bool sync);
  /// An error out of a piece of `samples` samples: rethrows anything but running out of memory,
  /// throws the out-of-memory report under on_oom = "fail" or where splitting cannot recover
  /// exactly; otherwise drops what the piece left, doubles splits_ and returns (the caller retries).
  void recover_from_out_of_memory(const std::exception_ptr& error, int64_t samples, bool sync, const StepPosition& at);
  /// Data-parallel: after some rank split this window, every rank takes the largest split.
  void agree_on_splits();
  void join_all_reduce(const AccumulationWindow& window);
  WindowAgreement agree_on_window(uint32_t deferred, const StepPosition& at);
  void update();
  /// 4b. The global gradient norm of `grads` (torch.nn.utils.clip_grad_norm_'s, foreach), clipped
  /// to train.max_grad_norm when that is set. No host sync: the norm stays on the device.
  void clip_by_norm(const std::vector<at::Tensor>& grads);
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
  int64_t window_batches_ = 0;   ///< non-empty pieces of micro-batches in this window so far
  int64_t window_backwards_ = 0; ///< pieces of this window whose backward completed (gradients hold them)
  int64_t splits_ = 1;           ///< pieces per micro-batch (train.on_oom = "split")
  bool split_this_window_ = false; ///< this rank doubled splits_ in the current window
  const char* piece_phase_ = "forward"; ///< where the current piece is, for an out-of-memory report
  bool window_poisoned_ = false; ///< this window saw a non-finite loss
  bool window_empty_ = false;    ///< no item in the window on any rank: no update
  int64_t skipped_steps_ = 0;
  /* Update statistics of the logging window (read_update_stats) */
  bool log_window_ = false;      ///< this window's step is a logging step: measure its gradient norm
  at::Tensor grad_norm_;         ///< the last measured norm, on the device
  at::Tensor clipped_steps_;     ///< steps of the logging window whose norm exceeded max_grad_norm
  int64_t clip_checked_steps_ = 0;
  int64_t scaler_skipped_ = 0;
};

}  // namespace tp
