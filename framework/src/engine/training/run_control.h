// The one owner of the run's stop and save decisions (ARCH-19, docs/engine.md "Stop and save").
// Every reason to stop or save arrives here: callback requests (deferred to the next window
// boundary or honoured now, the table in plugin_api/include/tp/iface/callback.h), early stopping,
// train.max_steps, train.max_time, the stop signals (kStopSignals). Reasons one rank sees alone (a
// callback on one rank, its clock, a signal) are raised as flags and agreed once per optimizer step inside
// the step's own all-reduce; reasons every rank computes alike (early stopping on reduced values,
// max_steps) are decided without a collective. The loop then asks stop(), take_save(), signal().
// A non-finite loss and an out-of-memory error that cannot be split are errors, not decisions:
// the step throws them (on every rank together, through the same agreement). So is a file rank 0
// fails to write: its error waits for the next agreement (the step's, a save's, the run's end),
// and there every rank throws it, instead of the others waiting out dist.timeout_s.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h" // ResumePosition
#include "engine/training/run_budget.h"
#include "engine/training/window_flags.h"

namespace tp {

class Collectives;

/// The stop signal a window's agreed flags carry (0 = none). When the ranks saw different ones,
/// kStopSignals' precedence (stop_signal.h) picks it on every rank alike.
int agreed_signal(uint32_t agreed) noexcept;

/// Why a run stops before train.epochs is done.
enum class StopCause { kCallback, kEarlyStopping, kMaxSteps, kMaxTime };

/// How often an evaluation asks whether another rank stops (RunControl::evaluation_stop_flags).
inline constexpr std::chrono::milliseconds kNoticePoll{250};

class RunControl {
 public:
  /// `collectives` and `budget` must outlive the control. `max_time_text` is train.max_time as
  /// written, for the message.
  RunControl(Collectives& collectives, const RunBudget& budget, std::string max_time_text);

  /* Raising */
  /// [main] Callback requests (TP_REQUEST_*) to honour at the next window boundary.
  void defer(uint32_t callback_requests) noexcept { deferred_ |= callback_requests; }
  /// [all ranks] Callback requests of an event every rank dispatched, honoured now: agreed over
  /// ranks (one collective; none when `any_callbacks` is false, the same on every rank).
  void honour_now(uint32_t callback_requests, bool any_callbacks);
  /// [main] The flags this rank brings to the window's agreement: the deferred requests, whether
  /// its clock used up train.max_time, whether a stop signal arrived. Clears the deferred ones.
  uint32_t take_window_flags();
  /// [main] Gives back the callback requests among `flags` (what take_window_flags returned) when
  /// the window they were taken for was never agreed (the loader ran dry inside it): they ride
  /// with the next window's agreement instead of being lost. The clock and the signal are read
  /// afresh each window and need no giving back.
  void return_unagreed(uint32_t flags) noexcept;
  /// [all ranks] The window's agreed flags (the same on every rank), once the optimizer step
  /// `step` is counted; `next` is where the run would continue after it.
  void window_agreed(uint32_t agreed, int64_t step, ResumePosition next);
  /// [main] This rank's stop-signal flag (kFlagsSignal: the signal its handler received), or 0.
  /// An atomic load.
  uint32_t signal_flags() const noexcept;
  /// [main] What an evaluation reads between batches (EvaluationPass::stop_flags): this rank's
  /// signal flag, which it also leaves as a note for the other ranks (Collectives::raise_notice,
  /// once); else, at most every kNoticePoll, kFlagPeerStop when another rank left that note, so a
  /// rank the signal did not reach stops its pass too instead of finishing its shard. Costs no
  /// collective; a store round trip per kNoticePoll under data-parallel training, none alone.
  uint32_t evaluation_stop_flags();
  /// [all ranks] An evaluation was abandoned on the flags `agreed` over ranks (its closing
  /// all-reduce): the agreed signal becomes signal(), as a window's agreement makes it.
  void evaluation_stopped(uint32_t agreed) noexcept;
  /// [all ranks] A reason every rank decides alike: stop after the current step or evaluation.
  void stop_for(StopCause cause, const std::string& reason);
  /// [all ranks] The loop left its epoch before the epoch's last batch, for the reasons given so
  /// far; `next` is the batch it would have trained next. When every reason is a callback's stop
  /// (or train.max_time, which window_agreed already recorded), the run pauses there rather than
  /// ends: pause() answers `next`, so a resumed run trains the epoch's remaining batches. Early
  /// stopping and train.max_steps end the run wherever they fall.
  void left_epoch_early(ResumePosition next);

  /* Answers */
  /// Whether the loop ends at the next boundary.
  bool stop() const noexcept { return !causes_.empty(); }
  /// Whether the run ended before train.epochs for a reason other than train.max_steps.
  bool stopped_early() const noexcept;
  /// Every reason given, "; "-joined, first first ("" when none).
  std::string reason() const;
  /// [main] Whether a save at the current position was asked for (cleared by the call).
  bool take_save() noexcept { return std::exchange(save_, false); }
  /// [all ranks] Runs `write`, which writes run files on rank 0 (history, checkpoints, report).
  /// A single process lets its error through at once. Data-parallel, rank 0 keeps the first
  /// error and carries on to the next agreement (the step's, or settle_writes()), where every
  /// rank throws it: rank 0 its own exception, the others a tp::Error quoting it.
  void rank0_write(const std::function<void()>& write);
  /// [all ranks] An agreement of its own on whether a rank-0 write failed (one collective;
  /// nothing to read for a single process), after a save and at the run's end. Throws as above.
  void settle_writes(const char* what);
  /// The stop signal the ranks agreed on (0 = none; agreed_signal picks one when they saw
  /// different ones), the same on every rank, whether or not this rank's own handler has run: the
  /// run saves where it is and every rank exits 128 + signal.
  int signal() const noexcept { return signal_; }
  /// Where a paused run continues: one train.max_time stopped, or one a callback stopped inside
  /// an epoch (left_epoch_early). Nothing when the run ends (its epochs done, early stopping,
  /// train.max_steps): then the final evaluation, SWA's finish and the epoch's record are due.
  const std::optional<ResumePosition>& pause() const noexcept { return pause_; }

 private:
  Collectives& collectives_;
  const RunBudget& budget_;
  std::string max_time_text_;
  uint32_t deferred_ = 0;
  std::vector<std::pair<StopCause, std::string>> causes_;
  bool save_ = false;
  int signal_ = 0;
  std::optional<ResumePosition> pause_;
  std::exception_ptr write_failure_; ///< rank 0's first failed write, thrown at the next agreement
  bool notice_left_ = false;                                ///< evaluation_stop_flags left its note
  std::chrono::steady_clock::time_point last_notice_poll_{}; ///< when it last asked for the others'
  /// [all ranks] After an agreement that carried kFlagWriteFailed: every rank throws rank 0's error.
  [[noreturn]] void fail_with_write_error();
};

}  // namespace tp
