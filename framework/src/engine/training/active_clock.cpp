#include "engine/training/active_clock.h"

#include <signal.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <string>

namespace tp {
namespace {

// A signal handler reaches the program only through lock-free atomics with static storage: the
// last reading's time (which the handler reads), the suspended total and the count (which it
// writes). Nothing else of the clock is process-wide.
struct SuspensionState {
  std::atomic<int64_t> stamp_ns{0};     ///< CLOCK_MONOTONIC of the last reading (0: none yet)
  std::atomic<int64_t> suspended_ns{0}; ///< every suspension so far
  std::atomic<int64_t> count{0};        ///< SIGCONTs so far; a reader retries when it moved
};
SuspensionState& state() {
  static SuspensionState s;
  return s;
}

int64_t monotonic_ns() noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now); // async-signal-safe
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

extern "C" void on_continue(int) {
  const int saved = errno;
  SuspensionState& s = state();
  const int64_t now = monotonic_ns();
  const int64_t last = s.stamp_ns.load();
  // No reading yet: nothing was being timed. The stamp moves to now, so a second SIGCONT at once
  // (one to the process and one to its group) adds nothing.
  if (last > 0 && now > last) s.suspended_ns.fetch_add(now - last);
  s.stamp_ns.store(now);
  s.count.fetch_add(1); // last: a reader that saw the old count retries with the new total
  errno = saved;
}

}  // namespace

void install_suspension_handler() {
  static_assert(std::atomic<int64_t>::is_always_lock_free);
  struct sigaction action{};
  action.sa_handler = &on_continue;
  action.sa_flags = SA_RESTART; // the stop and continue interrupt no read or write of ours
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGCONT, &action, nullptr);
}

double active_seconds() noexcept {
  SuspensionState& s = state();
  for (;;) {
    // A SIGCONT between these loads moves `count`: read again, or a reading from before the stop
    // would have the suspension subtracted (time running backwards) or a stale stamp would stay.
    const int64_t before = s.count.load();
    const int64_t now = monotonic_ns();
    s.stamp_ns.store(now);
    const int64_t suspended = s.suspended_ns.load();
    if (s.count.load() == before) return static_cast<double>(now - suspended) / 1e9;
  }
}

Suspensions suspensions() noexcept {
  SuspensionState& s = state();
  for (;;) {
    const int64_t count = s.count.load();
    const int64_t suspended = s.suspended_ns.load();
    if (s.count.load() == count) return {count, static_cast<double>(suspended) / 1e9};
  }
}

std::string describe_resumed(const Suspensions& since_last) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", since_last.seconds);
  const std::string several =
      since_last.count > 1 ? ", " + std::to_string(since_last.count) + " suspensions" : std::string();
  return std::string("resumed after ") + seconds + " s suspended (SIGSTOP ... SIGCONT" + several +
         "); not counted as training time (train.max_time, train_seconds, ms/step)";
}

Suspensions SuspensionNotes::take() noexcept {
  const Suspensions now = suspensions();
  const Suspensions since{now.count - seen_.count, now.seconds - seen_.seconds};
  seen_ = now;
  return since;
}

}  // namespace tp
