#include "tp/framework/engine/stop_signal.h"

#include <atomic>
#include <csignal>
#include <string>

namespace tp {
namespace {

// A signal handler can only talk to the program through a lock-free atomic with static storage;
// this is the one piece of process-wide state the host keeps, and only the handler writes it.
std::atomic<int>& received() {
  static std::atomic<int> signal_number{0};
  return signal_number;
}

extern "C" void on_stop_signal(int signal_number) {
  int expected = 0;
  received().compare_exchange_strong(expected, signal_number);
  // A second signal takes the default action: the user can always force an exit.
  std::signal(signal_number, SIG_DFL);
}

}  // namespace

void install_stop_signal_handlers() {
  static_assert(std::atomic<int>::is_always_lock_free);
  std::signal(SIGINT, &on_stop_signal);
  std::signal(SIGTERM, &on_stop_signal);
}

int pending_stop_signal() { return received().load(std::memory_order_relaxed); }

void stop_if_signalled(const std::string& command, const std::string& when) {
  if (const int signal_number = pending_stop_signal())
    throw Interrupted(signal_number, command + " stopped by signal " + std::to_string(signal_number) + " " + when);
}

}  // namespace tp
