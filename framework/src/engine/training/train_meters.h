// The training meters: the loss summed on the device (read on the host only at logging steps,
// epoch ends and checkpoints, each read a sync point on CUDA), the throughput and data-wait
// clocks, and the step-time report (docs/profiling.md). Data-parallel reads are sums over ranks.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/training/nan_policy.h"
#include "tp/framework/engine/scalars.h"
#include "tp/framework/profile/training_report.h"

namespace tp {

class Collectives;

class TrainMeters {
 public:
  /// `collectives` must outlive the meters. `nan_checks.at_read`: a loss read that is not finite
  /// throws (train.nan_policy = "stop", nan_policy.h).
  TrainMeters(c10::Device device, Collectives& collectives, NanChecks nan_checks);

  /* Loss: device accumulators of (sum of item losses, item count) */
  /// [main] Adds one micro-batch's loss sum and item count (double scalars on the device), and the
  /// sums of the loss's named terms (LossTerms::terms; the same names on every call).
  void add_loss(const at::Tensor& sum, const at::Tensor& items,
                const std::vector<std::pair<std::string, at::Tensor>>& terms = {});
  /// [all ranks] The logging window's (loss sum, item count) over all ranks, then resets it.
  /// Sync point on CUDA. The sums the step's agreement carried (set_agreed_window_sums) cost no
  /// collective; otherwise one small all-reduce. Throws tp::Error naming `span` ("between steps
  /// 3 and 5") when the sum is not finite and nan_checks.at_read is set.
  std::pair<double, double> read_window_loss(const std::string& span);
  /// [all ranks] Same for the epoch's accumulators (one small all-reduce); `span` as above.
  std::pair<double, double> read_epoch_loss(const std::string& span);
  /// The logging window's sums as one float64 vector on the device: [loss sum, item count,
  /// term sums...], for the step's agreement to carry (no copy to the host).
  at::Tensor window_sums() const;
  /// [all ranks] `sums` (window_sums() summed over ranks by the agreement): the next
  /// read_window_loss() reads these instead of making a collective.
  void set_agreed_window_sums(at::Tensor sums) { agreed_window_ = std::move(sums); }
  /// The named terms as the last read_*_loss() found them: "train/loss/<name>" = term sum over
  /// all ranks / the same item count (the terms ride in the same all-reduce). Empty when the loss
  /// has no terms.
  const Scalars& last_terms() const noexcept { return last_terms_; }

  /* Throughput: wall clocks, data wait and samples, per logging window and per epoch */
  /// [main] Restarts the epoch's and the window's clocks and counts.
  void start_epoch();
  /// [main] One micro-batch fetched after waiting `wait_s` seconds for it.
  void add_batch(double wait_s, int64_t samples);
  /// [main] One optimizer step ended.
  void count_step() noexcept { ++window_steps_; }
  /// [main] The logging window's time/step_s, time/data_wait_s, throughput/samples_per_s and
  /// the report's step split, peak memory and TFLOP/s; restarts the window. Call right after
  /// read_window_loss(), whose sync makes the wall time include the device work.
  Scalars read_window_throughput();
  /// The epoch so far: wall seconds, seconds waiting for data, samples.
  struct EpochClock {
    double seconds = 0.0;
    double wait_s = 0.0;
    int64_t samples = 0;
  };
  EpochClock epoch_clock() const;

  /* Checkpoints: the running sums travel with the position */
  /// [main] {epoch sum, epoch count, window sum, window count}, then with named terms the epoch's
  /// term sums and the window's. Sync point on CUDA.
  std::vector<double> running_loss() const;
  /// [main] Restores running_loss(); `holder` false (ranks other than 0) keeps zeros, since the
  /// checkpoint holds the global sums and rank 0 carries them on.
  void load_running_loss(const std::vector<double>& values, bool holder);
  /// [all ranks] Sums the accumulators into rank 0's (others zero), so a checkpoint holds the
  /// global values and later sums stay right. No-op for a single process.
  void gather_running_loss();

  /// Where the run looks for a non-finite training loss (nan_policy.h): the step runner's
  /// per-step check and these meters' read check come from this one decision.
  const NanChecks& nan_checks() const noexcept { return nan_checks_; }

  /// The step-time report the step runner times its phases in.
  TrainingReport& report() noexcept { return report_; }
  const TrainingReport& report() const noexcept { return report_; }

 private:
  /// [sum, count, terms...] summed over all ranks, on the host (`terms` may be undefined).
  at::Tensor global_sums(const at::Tensor& sum, const at::Tensor& count, const at::Tensor& terms);
  /// (sum, count) and last_terms_ from a host copy of [sum, count, terms...]; applies the NaN check.
  std::pair<double, double> read_sums(const at::Tensor& host, const std::string& span);

  Collectives& collectives_;
  NanChecks nan_checks_;
  at::Tensor agreed_window_; ///< window_sums() over all ranks, from the step's agreement; undefined otherwise
  at::Tensor window_loss_sum_, window_count_; ///< since the last log step, on device (no sync)
  at::Tensor epoch_loss_sum_, epoch_count_;
  std::vector<std::string> term_names_;      ///< the loss's named terms (from the first add_loss)
  at::Tensor window_terms_, epoch_terms_;    ///< float64 [terms] on device; undefined without terms
  std::vector<double> pending_terms_;        ///< term sums from a checkpoint, applied at the first add_loss
  Scalars last_terms_;
  double window_wait_s_ = 0.0, epoch_wait_s_ = 0.0;
  int64_t window_samples_ = 0, epoch_samples_ = 0, window_steps_ = 0;
  double window_start_s_ = 0.0, epoch_start_s_ = 0.0; ///< active_seconds(): suspensions left out
  TrainingReport report_;
};

}  // namespace tp
