// Running a training as a child process of this executable, with the stop signals passed on:
// `host sweep` runs each cell this way, so a cell gets a fresh process (LibTorch, plugins, peak
// memory) and a Ctrl-C stops it the way it stops `host train` (save last.pt, exit 130/143).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <array>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "tp/framework/engine/stop_signal.h"

namespace tp::cli {

/// How a child ended.
struct ChildExit {
  int exit_code = 0;        ///< its exit status, or 128 + N when signal N killed it
  int forwarded_signal = 0; ///< the first stop signal (kStopSignals) passed on to it while it ran, or 0
  bool killed = false;      ///< a signal ended it (it did not exit by itself)
  int watch_signal = 0;     ///< the signal ChildOptions::watch asked to send it, or 0
  long max_rss_kb = 0;      ///< its peak resident set size in KiB (wait4's ru_maxrss), whatever ended it
};

/// Optional settings of SignalForwarder::run.
struct ChildOptions {
  /// When set, the child's stdout and stderr go to this file (created or truncated), not to ours.
  std::filesystem::path output;
  /// When set, called with the child's pid about every 100 ms while it runs ([main]); a non-zero
  /// return is a signal to send it, once (`host tune` stops a diverged lr sweep with SIGTERM and
  /// a batch-size trial over its memory limit with SIGKILL).
  std::function<int(pid_t)> watch;
};

/// While alive, catches the stop signals (kStopSignals: SIGUSR1, SIGUSR2, SIGTERM, SIGHUP, SIGINT)
/// for this process (the previous handlers come back in the destructor) and passes each one to the
/// running child. A SIGHUP that nohup ignored stays ignored (keeps_ignored). One per process at a time; [main].
///
/// Rationale: the child runs in its own process group, so a terminal's Ctrl-C reaches it once,
/// through this forwarder, and not also directly: a second signal would make `host train` skip
/// its save and die. The child also gets SIGTERM when this process dies (PR_SET_PDEATHSIG), so
/// `kill -9` of the sweep still lets the running cell save.
class SignalForwarder {
 public:
  /// Throws tp::Error when the handlers cannot be installed (no pipe).
  SignalForwarder();
  ~SignalForwarder();
  SignalForwarder(const SignalForwarder&) = delete;
  SignalForwarder& operator=(const SignalForwarder&) = delete;

  /// The first stop signal received so far (while no child ran, or passed on to one), or 0.
  int received();

  /// Starts /proc/self/exe with `args` (args[0] is the name it sees as argv[0]) and the current
  /// environment, its stdout and stderr shared with this process (or sent to `options.output`),
  /// and waits for it; stop signals arriving meanwhile are passed on, each once. Throws
  /// tp::Error when it cannot start (the child exits with kExitLaunchFailed when exec fails) or
  /// the output file cannot be created.
  ChildExit run(const std::vector<std::string>& args, const ChildOptions& options = {});

 private:
  /// Reads the pending signal numbers, passing each to `child` when > 0; returns the first, or 0.
  int drain(int child);

  int pipe_[2] = {-1, -1};
  int received_ = 0;
  std::array<struct sigaction, kStopSignals.size()> previous_{}; ///< in kStopSignals' order
};

}  // namespace tp::cli
