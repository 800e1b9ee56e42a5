// The stop-signal handlers (stop_signal.h) in a forked child, whose signals cannot hit the test
// process: a copy of the first signal within kSameStopMs is the same stop (timeout and `kill
// -PGID` signal a process and its group, so one stop arrives twice), a later one forces the exit.
// Before: any second signal killed the run before it saved.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <doctest/doctest.h>

#include "tp/framework/engine/stop_signal.h"

namespace {

/// Runs, in a forked child: install the handlers, raise SIGINT, wait `gap_ms`, raise it again,
/// then exit 0 if a stop is pending. Returns the child's wait status.
int child_status(int gap_ms) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    tp::install_stop_signal_handlers();
    std::raise(SIGINT);
    ::usleep(static_cast<useconds_t>(gap_ms) * 1000);
    std::raise(SIGINT);
    ::_exit(tp::pending_stop_signal() == SIGINT ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("stop signals: a copy within a second is the same stop; one later forces the exit") {
  const int copy = child_status(50);
  CHECK(WIFEXITED(copy));
  CHECK(WEXITSTATUS(copy) == 0);  // alive, the stop pending: it will save
  const int insisting = child_status(static_cast<int>(tp::kSameStopMs) + 200);
  CHECK(WIFSIGNALED(insisting));
  CHECK(WTERMSIG(insisting) == SIGINT);
}

TEST_CASE("every one of kStopSignals is handled: the process lives on with that stop pending") {
  for (const int signal_number : tp::kStopSignals) {
    INFO(signal_number);
    const pid_t pid = ::fork();
    if (pid == 0) {
      tp::install_stop_signal_handlers();
      std::raise(signal_number);
      ::_exit(tp::pending_stop_signal() == signal_number ? 0 : 1);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
}

// Soak trial F1 made SIGHUP a stop signal; `nohup host train ...` still promises that the run
// outlives its session, so a SIGHUP ignored when the handlers are installed stays ignored.
TEST_CASE("a SIGHUP that nohup ignored stays ignored: no stop, no exit") {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::signal(SIGHUP, SIG_IGN);
    tp::install_stop_signal_handlers();
    std::raise(SIGHUP);
    ::_exit(tp::pending_stop_signal() == 0 && tp::keeps_ignored(SIGHUP) && !tp::keeps_ignored(SIGTERM) ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
