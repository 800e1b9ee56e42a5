#include "engine/training/run_control.h"

#include <cstddef>

#include "tp/framework/dist/collectives.h"
#include "engine/training/active_clock.h"
#include "tp/framework/engine/stop_signal.h"
#include "tp/framework/error.h"
#include "tp/iface/callback.h"

namespace tp {
namespace {

/// A stop signal's own bit (0 for a signal that is not a stop signal).
uint32_t signal_flag(int signal_number) noexcept {
  for (std::size_t i = 0; i < kStopSignals.size(); ++i)
    if (kStopSignals[i] == signal_number) return kSignalFlags[i];
  return 0;
}

}  // namespace

int agreed_signal(uint32_t agreed) noexcept {
  for (std::size_t i = 0; i < kStopSignals.size(); ++i) // in their precedence
    if (agreed & kSignalFlags[i]) return kStopSignals[i];
  return 0;
}

RunControl::RunControl(Collectives& collectives, const RunBudget& budget, std::string max_time_text)
    : collectives_(collectives), budget_(budget), max_time_text_(std::move(max_time_text)) {}

void RunControl::honour_now(uint32_t callback_requests, bool any_callbacks) {
  if (!any_callbacks) return; // no callback on any rank: nothing to ask, nothing to agree
  const uint32_t agreed = collectives_.agree(callback_requests & (TP_REQUEST_STOP | TP_REQUEST_SAVE),
                                             "agree on callback stop/save requests");
  if (agreed & TP_REQUEST_STOP) stop_for(StopCause::kCallback, "a callback requested a stop");
  if (agreed & TP_REQUEST_SAVE) save_ = true;
}

uint32_t RunControl::take_window_flags() {
  uint32_t flags = 0;
  if (deferred_ & TP_REQUEST_STOP) flags |= kFlagStopRequest;
  if (deferred_ & TP_REQUEST_SAVE) flags |= kFlagSaveRequest;
  deferred_ = 0;
  if (budget_.time_up()) flags |= kFlagTimeUp;
  flags |= signal_flag(pending_stop_signal());
  if (write_failure_) flags |= kFlagWriteFailed;
  return flags;
}

uint32_t RunControl::signal_flags() const noexcept { return signal_flag(pending_stop_signal()); }

uint32_t RunControl::evaluation_stop_flags() {
  // A reading of the training clock per evaluation batch: a suspension during an evaluation is
  // counted from here, not from the step before it (active_clock.h).
  active_seconds();
  if (const uint32_t own = signal_flags(); own != 0) {
    if (!std::exchange(notice_left_, true)) collectives_.raise_notice("evaluation_stop");
    return own;
  }
  const auto now = std::chrono::steady_clock::now();
  if (now - last_notice_poll_ < kNoticePoll) return 0;
  last_notice_poll_ = now;
  return collectives_.notice_raised("evaluation_stop") ? kFlagPeerStop : 0u;
}

void RunControl::evaluation_stopped(uint32_t agreed) noexcept {
  if (const int agreed_stop = agreed_signal(agreed); agreed_stop != 0 && signal_ == 0) signal_ = agreed_stop;
}

void RunControl::return_unagreed(uint32_t flags) noexcept {
  if (flags & kFlagStopRequest) deferred_ |= TP_REQUEST_STOP;
  if (flags & kFlagSaveRequest) deferred_ |= TP_REQUEST_SAVE;
}

void RunControl::rank0_write(const std::function<void()>& write) {
  if (collectives_.world_size() == 1) {
    write();
    return;
  }
  try {
    write();
  } catch (const std::exception&) {
    // Not thrown here: the other ranks are on their way to the next collective and would wait
    // there for dist.timeout_s, then report a lost rank instead of the cause.
    if (!write_failure_) write_failure_ = std::current_exception();
  }
}

void RunControl::settle_writes(const char* what) {
  if (collectives_.agree(write_failure_ ? kFlagWriteFailed : 0u, what) & kFlagWriteFailed) fail_with_write_error();
}

void RunControl::fail_with_write_error() {
  std::string own;
  if (write_failure_) try {
      std::rethrow_exception(write_failure_);
    } catch (const std::exception& e) {
      own = e.what();
    }
  // Every rank: the message travels through the rendezvous store while rank 0 still serves it.
  const std::string first = collectives_.first_failure(own, "pass on rank 0's failed write");
  if (write_failure_) std::rethrow_exception(write_failure_);
  throw Error("writing the run's files failed on " + first + (first.ends_with('.') ? " " : ". ") +
              "Every rank stops; the checkpoints written before are intact (--resume auto continues from the newest).");
}

void RunControl::window_agreed(uint32_t agreed, int64_t step, ResumePosition next) {
  if (agreed & kFlagWriteFailed) fail_with_write_error();
  if (agreed & kFlagStopRequest) stop_for(StopCause::kCallback, "a callback requested a stop");
  if (agreed & kFlagSaveRequest) save_ = true;
  // The agreed signal, not this rank's own: a rank that agrees before its own handler ran (or
  // never gets the signal) must exit with the same code as the others (cluster trial F1: it
  // exited 143 beside 138, and srun's highest code defeated the requeue on 138).
  if (const int agreed_stop = agreed_signal(agreed); agreed_stop != 0 && signal_ == 0) signal_ = agreed_stop;
  if ((agreed & kFlagTimeUp) && !pause_) {
    pause_ = next;
    stop_for(StopCause::kMaxTime, "train.max_time (" + max_time_text_ + ") is used up at step " + std::to_string(step) +
                                      "; saved where it stopped. To continue, raise train.max_time and run again "
                                      "with --resume auto.");
  }
  if (budget_.steps_done(step)) stop_for(StopCause::kMaxSteps, "train.max_steps reached at step " + std::to_string(step));
}

void RunControl::left_epoch_early(ResumePosition next) {
  if (pause_ || causes_.empty()) return;
  for (const auto& [cause, text] : causes_)
    if (cause != StopCause::kCallback) return; // early stopping or max_steps: the run's end
  pause_ = next;
  causes_.front().second += " inside epoch " + std::to_string(next.epoch + 1) +
                            "; saved where it stopped (--resume auto trains the epoch's remaining batches)";
}

void RunControl::stop_for(StopCause cause, const std::string& reason) {
  for (const auto& [known, text] : causes_)
    if (known == cause) return; // the first of each kind tells why
  causes_.emplace_back(cause, reason);
}

bool RunControl::stopped_early() const noexcept {
  for (const auto& [cause, text] : causes_)
    if (cause != StopCause::kMaxSteps) return true;
  return false;
}

std::string RunControl::reason() const {
  std::string joined;
  for (const auto& [cause, text] : causes_) joined += (joined.empty() ? "" : "; ") + text;
  return joined;
}

}  // namespace tp
