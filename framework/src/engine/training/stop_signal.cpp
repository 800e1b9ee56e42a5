#include "tp/framework/engine/stop_signal.h"

#include "engine/training/active_clock.h"

#include <signal.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <csignal>
#include <string>

namespace tp {
namespace {

// A signal handler can only talk to the program through lock-free atomics with static storage;
// these are the one piece of process-wide state the host keeps, and only the handler writes them.
std::atomic<int>& received() {
  static std::atomic<int> signal_number{0};
  return signal_number;
}
std::atomic<int64_t>& first_at_ms() {
  static std::atomic<int64_t> milliseconds{0};
  return milliseconds;
}

int64_t monotonic_ms() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  return static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
}

extern "C" void on_stop_signal(int signal_number) {
  const int64_t now = monotonic_ms();
  int64_t unset = 0;
  first_at_ms().compare_exchange_strong(unset, now);  // before `received`: a later copy reads it
  int expected = 0;
  if (received().compare_exchange_strong(expected, signal_number)) return;
  // One stop often arrives twice at once: `timeout` and `kill -INT -PGID` signal the process and
  // its group, a terminal's Ctrl-C reaches a process and the launcher that forwards it. Those
  // copies are the same request; a signal a second or more after the first is the user insisting,
  // and takes the default action.
  if (now - first_at_ms().load() < kSameStopMs) return;
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

}  // namespace

void install_stop_signal_handlers() {
  static_assert(std::atomic<int>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free);
  // SIGUSR1 and SIGUSR2 among them: SLURM's warning before a time limit or preemption (`#SBATCH
  // --signal=USR1@90`, Lightning's auto-requeue convention), whose default action kills the
  // process without a save; SIGHUP too, what a job gets when its ssh, tmux or login session dies
  // (soak trial F1: it killed the run unsaved and unlogged).
  for (const int signal_number : kStopSignals)
    if (!keeps_ignored(signal_number)) std::signal(signal_number, &on_stop_signal);
  // And SIGCONT, which only counts a suspension so the training clock leaves it out (active_clock.h).
  install_suspension_handler();
}

bool keeps_ignored(int signal_number) {
  if (signal_number != SIGHUP) return false;
  struct sigaction current{};
  return ::sigaction(SIGHUP, nullptr, &current) == 0 && current.sa_handler == SIG_IGN;
}

void default_stop_signals_in_child() {
  for (const int signal_number : kStopSignals)
    if (!keeps_ignored(signal_number)) ::signal(signal_number, SIG_DFL);
}

int pending_stop_signal() { return received().load(std::memory_order_relaxed); }

void stop_if_signalled(const std::string& command, const std::string& when) {
  if (const int signal_number = pending_stop_signal())
    throw Interrupted(signal_number, command + " stopped by signal " + std::to_string(signal_number) + " " + when);
}

}  // namespace tp
