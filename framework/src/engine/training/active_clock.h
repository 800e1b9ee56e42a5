// The training clock: CLOCK_MONOTONIC with the intervals the process spent suspended (SIGSTOP ...
// SIGCONT: SLURM's `scontrol suspend` and gang scheduling, a shell's Ctrl-Z) taken out, so that
// train.max_time, train_seconds and the step timers count training, not waiting stopped (soak
// trial F2: a 40 s SIGSTOP used up a 20 s max_time, and report.toml said 464 ms/step for 20 ms
// steps). SLURM does not charge suspended time to a job's limit either. CLOCK_BOOTTIME would not
// help: it differs from CLOCK_MONOTONIC by system suspend, not by a stopped process.
//
// SIGSTOP cannot be caught, so when the stop came is unknown. Each reading stamps its time, and the
// SIGCONT handler counts everything from the last stamp to its own arrival as suspended. The
// error is the time the process ran between its last reading and the stop, counted as suspended:
// the trainer reads once per optimizer step and once per stoppable evaluation batch, so at most
// one step (its data wait included) or one evaluation batch; a stop during work with no reading
// inside (a checkpoint save, the sanity check, a final or SWA evaluation, a plot redraw) costs
// that work from its start. A SIGCONT sent to a process that was not stopped costs the time since
// the last reading.
#pragma once

#include <cstdint>
#include <string>

namespace tp {

/// Installs the SIGCONT handler (idempotent, SA_RESTART). [main] Before it, and in a process
/// that never calls it, active_seconds() is the plain monotonic clock.
void install_suspension_handler();

/// [any thread] Monotonic seconds with every suspension so far taken out (an arbitrary origin:
/// only differences mean anything). Stamps the reading: a later SIGCONT counts from here.
/// Lock-free; about the cost of clock_gettime.
double active_seconds() noexcept;

/// Suspensions: how many (SIGCONTs received) and their seconds together.
struct Suspensions {
  int64_t count = 0;
  double seconds = 0.0;
};

/// [any thread] The process's suspensions so far.
Suspensions suspensions() noexcept;

/// The shortest suspension the trainer logs: a SIGCONT that came with a stop signal to a process
/// that was never stopped (timeout(1), SLURM's cancel) would otherwise log "resumed after 0.0 s".
inline constexpr double kNotedSuspensionSeconds = 0.5;

/// "resumed after 40.1 s suspended (SIGSTOP ... SIGCONT); not counted as training time
/// (train.max_time, train_seconds, ms/step)", the operator's one line per suspension.
std::string describe_resumed(const Suspensions& since_last);

/// Hands out each suspension once: the trainer logs what take() returns (count 0: none since the
/// last call). Starts from the suspensions before its construction, which it does not report.
class SuspensionNotes {
 public:
  /// [main] The suspensions since the last call (or the construction).
  Suspensions take() noexcept;

 private:
  Suspensions seen_ = suspensions();
};

}  // namespace tp
