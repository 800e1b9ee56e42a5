#include "child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "tp/framework/error.h"

namespace tp::cli {
namespace {

// A signal handler reaches the program only through static storage: the write end of the
// forwarder's pipe. The handler writes the signal number; the main thread reads and passes it on.
std::atomic<int> g_forward_fd{-1};

extern "C" void on_forwarded_signal(int number) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(number);
  [[maybe_unused]] const ssize_t n = ::write(g_forward_fd.load(), &byte, 1);
  errno = saved;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return exit_code_for_signal(WTERMSIG(status));
  return kExitRuntime;
}

}  // namespace

SignalForwarder::SignalForwarder() {
  if (::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0)
    throw Error(std::string("host sweep: cannot create a pipe for signal forwarding: ") + std::strerror(errno));
  g_forward_fd.store(pipe_[1]);
  struct sigaction action{};
  action.sa_handler = &on_forwarded_signal;
  ::sigemptyset(&action.sa_mask);
  for (std::size_t i = 0; i < kStopSignals.size(); ++i) {
    ::sigaction(kStopSignals[i], nullptr, &previous_[i]);
    if (!keeps_ignored(kStopSignals[i])) ::sigaction(kStopSignals[i], &action, nullptr);
  }
}

SignalForwarder::~SignalForwarder() {
  for (std::size_t i = 0; i < kStopSignals.size(); ++i) ::sigaction(kStopSignals[i], &previous_[i], nullptr);
  g_forward_fd.store(-1);
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

int SignalForwarder::drain(int child) {
  int first = 0;
  unsigned char byte = 0;
  while (::read(pipe_[0], &byte, 1) == 1) {
    if (first == 0) first = byte;
    if (received_ == 0) received_ = byte;
    if (child > 0) ::kill(child, byte);
  }
  return first;
}

int SignalForwarder::received() {
  drain(-1);
  return received_;
}

ChildExit SignalForwarder::run(const std::vector<std::string>& args, const ChildOptions& options) {
  // Built before fork(): the child calls only async-signal-safe functions until exec.
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  int output = -1;
  if (!options.output.empty()) {
    output = ::open(options.output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (output < 0)
      throw Error("host: cannot create " + options.output.string() + " for a child process's output: " +
                  std::strerror(errno) + ". Check that its directory is writable.");
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    if (output >= 0) ::close(output);
    throw Error(std::string("host: cannot start a training process (fork): ") + std::strerror(error));
  }
  if (pid == 0) {
    default_stop_signals_in_child(); // nohup's SIGHUP stays ignored
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(exit_code_for_signal(SIGTERM)); // the parent is already gone
    if (output >= 0 && (::dup2(output, STDOUT_FILENO) < 0 || ::dup2(output, STDERR_FILENO) < 0))
      ::_exit(kExitLaunchFailed);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(kExitLaunchFailed);
  }
  if (output >= 0) ::close(output);
  ::setpgid(pid, pid); // also here, so no signal can find the child still in our group
  ChildExit result;
  for (;;) {
    pollfd fd{pipe_[0], POLLIN, 0};
    ::poll(&fd, 1, 100); // EINTR (a signal) only ends the wait early
    if (const int forwarded = drain(pid); forwarded != 0 && result.forwarded_signal == 0)
      result.forwarded_signal = forwarded;
    int status = 0;
    rusage usage{};
    const pid_t done = ::wait4(pid, &status, WNOHANG, &usage);
    if (done == pid) {
      result.exit_code = exit_code_of(status);
      result.killed = WIFSIGNALED(status);
      result.max_rss_kb = usage.ru_maxrss; // Linux: KiB
      return result;
    }
    if (done == 0 && options.watch && result.watch_signal == 0)
      if (const int signal = options.watch(pid); signal != 0) {
        result.watch_signal = signal;
        ::kill(pid, signal);
      }
    if (done < 0 && errno != EINTR)
      throw Error(std::string("host: lost track of the training process (wait4): ") + std::strerror(errno));
  }
}

}  // namespace tp::cli
