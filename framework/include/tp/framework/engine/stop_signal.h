// The stop signals' handling (SIGUSR1, SIGUSR2, SIGTERM, SIGHUP, SIGINT): the first one asks the
// trainer to finish the current optimizer step, save a checkpoint at that exact position and exit
// with 128 + signal (138 / 140 / 143 / 129 / 130); a signal
// kSameStopMs or more after it kills the process the default way (the user insists). Copies within
// that time are the same stop delivered twice (to the process and to its group) and change nothing.
#pragma once

#include <array>
#include <csignal>

#include "tp/framework/error.h"

namespace tp {

/// The stop signals, the one list of them: the ranks' handlers (install_stop_signal_handlers),
/// the window flags they are agreed with (RunControl) and the launcher's forwarding all read it.
/// Its order is their precedence when ranks saw different ones, most deliberate first: SIGUSR1
/// (the scheduler's warning before a time limit or preemption: exit 138 is what a requeue script
/// tests), SIGUSR2 (the same warning where a site's `--signal` chose it), SIGTERM (the scheduler or
/// the system ending the job), SIGHUP (the login session, ssh or tmux parent went away: incidental
/// to the job), SIGINT (a person's Ctrl-C). SIGQUIT and SIGALRM keep their default action.
inline constexpr std::array<int, 5> kStopSignals{SIGUSR1, SIGUSR2, SIGTERM, SIGHUP, SIGINT};

/// How long after a stop signal another one counts as the same stop (one second: a person's
/// second Ctrl-C comes later than the copies a group signal makes, which arrive within microseconds).
inline constexpr long long kSameStopMs = 1000;

/// Installs the handlers (idempotent), and SIGCONT's, which only notes a suspension for the
/// training clock (soak trial F2). Call once from the host's main thread.
void install_stop_signal_handlers();
/// Whether this process leaves `signal_number` as it found it: SIGHUP while it is ignored, as
/// `nohup host train ...` sets it (nohup promises the run outlives its session; a SIGHUP
/// handler would stop it instead). False for every other signal.
bool keeps_ignored(int signal_number);
/// [a forked child, before its exec] Gives the stop signals their default action back, except a
/// SIGHUP that nohup ignored (keeps_ignored): the program the child becomes installs its own
/// handlers. Async-signal-safe (signal, sigaction).
void default_stop_signals_in_child();
/// The first stop signal received (one of kStopSignals), or 0. Async-signal-safe to set, cheap to read.
int pending_stop_signal();

/// Throws Interrupted when a stop signal has arrived: "<command> stopped by signal N <when>".
/// For the points between a command's phases before its first output file (after the datasets'
/// prepare, after creating the components), where stopping needs no save. Example:
///   stop_if_signalled("host train", "while the datasets were prepared; nothing was trained");
void stop_if_signalled(const std::string& command, const std::string& when);

/// Thrown after the interrupted run saved its checkpoint; exits with exit_code_for_signal(signal).
class Interrupted : public Error {
 public:
  explicit Interrupted(int signal_number, const std::string& message) : Error(message), signal_(signal_number) {}
  int exit_code() const noexcept override { return exit_code_for_signal(signal_); }

 private:
  int signal_;
};

}  // namespace tp
