// The training clock (engine/training/active_clock.h) in a forked child that stops itself with
// SIGSTOP while the test process waits 400 ms and continues it: the clock leaves the stop out, and
// the suspension is counted and handed out once (soak trial F2: a suspension used up
// train.max_time and counted as step time). Before the clock, no reading left anything out.
#include "engine/training/active_clock.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <doctest/doctest.h>

namespace {

double monotonic_seconds() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

/// In the child: each failed expectation sets one bit of its exit status.
int suspended_child() {
  tp::install_suspension_handler();
  tp::SuspensionNotes notes;
  const double active_before = tp::active_seconds();
  const double wall_before = monotonic_seconds();
  ::raise(SIGSTOP); // the parent continues it after 400 ms
  const double active = tp::active_seconds() - active_before;
  const double wall = monotonic_seconds() - wall_before;
  const tp::Suspensions seen = notes.take();
  int failed = 0;
  if (wall < 0.39) failed |= 1;                         // it really was stopped
  if (active > 0.1) failed |= 2;                        // the clock left the stop out
  if (seen.count != 1 || seen.seconds < 0.39) failed |= 4; // counted once, its length
  if (notes.take().count != 0) failed |= 8;             // handed out once
  if (tp::active_seconds() < active_before) failed |= 16; // never backwards
  return failed;
}

}  // namespace

TEST_CASE("the training clock leaves a SIGSTOP ... SIGCONT suspension out and reports it once") {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(suspended_child());
  int status = 0;
  REQUIRE(::waitpid(pid, &status, WUNTRACED) == pid);
  REQUIRE(WIFSTOPPED(status));
  ::usleep(400'000);
  ::kill(pid, SIGCONT);
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0); // the bits of suspended_child's failed checks
}

TEST_CASE("without a suspension the training clock runs with the monotonic clock") {
  const double active_before = tp::active_seconds(), wall_before = monotonic_seconds();
  ::usleep(50'000);
  const double active = tp::active_seconds() - active_before, wall = monotonic_seconds() - wall_before;
  CHECK(active >= 0.05);
  CHECK(active == doctest::Approx(wall).epsilon(0.01));
  CHECK(tp::describe_resumed({1, 40.06}) ==
        "resumed after 40.1 s suspended (SIGSTOP ... SIGCONT); not counted as training time (train.max_time, "
        "train_seconds, ms/step)");
}
