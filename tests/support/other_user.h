// The other user of a shared directory, for the tests of what the host writes there (issue 58):
// a child process that runs as uid/gid 65534 ("nobody") when the test runs as root, else as this
// user, so a symlink it plants is another user's wherever the machine allows.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <functional>

namespace tp::test {

/// Whether the child runs under another uid (the test runs as root).
inline bool other_user_is_distinct() { return ::geteuid() == 0; }

/// Runs `act` in a forked child, as uid/gid 65534 when this process is root; true when `act`
/// returned true there. The child leaves with _exit: no destructor or atexit handler of the test
/// process runs twice.
inline bool as_other_user(const std::function<bool()>& act) {
  const pid_t child = ::fork();
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(2);
    ::_exit(act() ? 0 : 1);
  }
  int status = 0;
  return child > 0 && ::waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace tp::test
