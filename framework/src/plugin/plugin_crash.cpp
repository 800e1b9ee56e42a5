#include "tp/framework/plugin/plugin_crash.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>
#include <string>

#include "tp/framework/util/bounded_text.h"

namespace tp {
namespace {

// The slot the handler reads. Plain thread-local pointers with constant initialisation: in the
// executable they are reached without a call to __tls_get_addr, so reading them in a signal
// handler is safe, and setting them costs five stores per plugin call.
struct CallSlot {
  const char* id;
  const char* function;
  uint64_t index;
  uint64_t epoch;      ///< the sample's 0-based ctx.epoch; UINT64_MAX: not a sample's call
  const char* library; ///< the component's file; nullptr: not known here
};
constinit thread_local CallSlot t_call{nullptr, nullptr, UINT64_MAX, UINT64_MAX, nullptr};

// The handler may use only static storage: the checkpoint directory is copied here once, at
// install time, from the main thread, before any plugin runs. SIGABRT is among them because a
// plugin's abort(), a failed assert() in it and a C++ exception that escapes it (std::terminate)
// all end in abort(): without it those died with a bare exit 134 naming nothing.
constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct HandlerText {
  char checkpoint_dir[1024]; ///< empty: not a run (`host plugins check`)
  char config_file[1024];    ///< the run's config.toml, for the reproduce command
  struct sigaction previous[std::size(kSignals)]; ///< what was installed before (default, or a sanitizer's), per kSignals
};
HandlerText& handler_text() {
  static HandlerText text{};
  return text;
}

void put_bytes(const char* text, std::size_t left) {
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<std::size_t>(n);
  }
}

void put(const char* text) {
  if (text != nullptr) put_bytes(text, std::strlen(text));
}

// `text` as one shell word, so the reproduce command can be pasted whatever the path holds
// (spaces, quotes, `$(...)`): as it is when every byte is plain, else in single quotes with each
// ' written '\''.
void put_shell_word(const char* text) {
  const auto plain = [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           std::strchr("_./-+:=@%,", ch) != nullptr;
  };
  const std::size_t length = std::strlen(text);
  if (length > 0 && std::all_of(text, text + length, plain)) {
    put_bytes(text, length);
    return;
  }
  put("'");
  for (const char* quote; (quote = std::strchr(text, '\'')) != nullptr; text = quote + 1) {
    put_bytes(text, static_cast<std::size_t>(quote - text));
    put("'\\''");
  }
  put(text);
  put("'");
}

void put_number(uint64_t value) {
  char digits[24];
  char* p = digits + sizeof digits;
  *--p = '\0';
  do *--p = static_cast<char>('0' + value % 10); while ((value /= 10) != 0);
  put(p);
}

const char* signal_name(int signal_number) {
  switch (signal_number) {
    case SIGSEGV: return "SIGSEGV (invalid memory access)";
    case SIGBUS: return "SIGBUS (bad memory access)";
    case SIGFPE: return "SIGFPE (arithmetic fault, e.g. integer division by zero)";
    case SIGILL: return "SIGILL (illegal instruction)";
    case SIGABRT:
      return "SIGABRT (abort: the plugin called abort(), an assertion failed, or a C++ exception escaped it and "
             "std::terminate ran; its message, if any, is above)";
    default: return "a fatal signal";
  }
}

// Whether this thread's own code raised the signal: a fault, or abort() (raise: SI_TKILL from our
// own pid). A SIGABRT another process sent (`kill -ABRT`) lands on any thread, perhaps one that is
// inside a plugin call, and says nothing about the plugin.
bool raised_here(int signal_number, const siginfo_t* info) {
  if (signal_number != SIGABRT) return true;
  return info != nullptr && info->si_code == SI_TKILL && info->si_pid == ::getpid();
}

// " in get_sample (sample index 13, epoch 2)": where in the plugin the process ended.
void put_call_place(const CallSlot& call) {
  put(" in ");
  put(call.function);
  if (call.index == UINT64_MAX) return;
  put(" (sample index ");
  put_number(call.index);
  if (call.epoch != UINT64_MAX) {
    put(", epoch ");
    put_number(call.epoch + 1); // counted from 1, as every other message of the host
  }
  put(")");
}

// The report's end after `verdict` (". This is a bug in the plugin"): how to reproduce the call,
// whom to tell and, in a run, where it continues from. Then the process ends with exit 5.
[[noreturn]] void put_advice_and_exit(const CallSlot& call, const char* verdict) {
  put(verdict);
  const HandlerText& text = handler_text();
  if (text.checkpoint_dir[0] == '\0') { // `host plugins check`: no run, nothing to resume
    put(": report it to the plugin's author.\n");
    ::_exit(kExitPluginCrash);
  }
  put(": reproduce it with `host plugins check ");
  if (call.library != nullptr)
    put_shell_word(call.library);
  else
    put("<its .so>");
  put(" --config ");
  put_shell_word(text.config_file);
  if (call.index != UINT64_MAX) {
    put(" --index ");
    put_number(call.index);
    // plugins check's --epoch is the ctx.epoch the sample is read in (0-based).
    if (call.epoch != UINT64_MAX && call.epoch > 0) {
      put(" --epoch ");
      put_number(call.epoch);
    }
  }
  put("`");
  put(", and report it to the plugin's author. Nothing was saved after that (the process state cannot be "
      "trusted), but checkpoints are written atomically: the last one in ");
  put(text.checkpoint_dir);
  put(" is complete, and `host train --config ... --resume auto` continues from it once the plugin is fixed.\n");
  ::_exit(kExitPluginCrash);
}

extern "C" void on_fatal_signal(int signal_number, siginfo_t* info, void*) {
  const CallSlot call = t_call;
  if (call.id == nullptr || !raised_here(signal_number, info)) {
    // Not in plugin code: a host bug (or LibTorch's or glibc's own abort, or a signal sent from
    // outside). Hand it to whatever handled it before (the default action's core dump, or ASan's
    // report): returning re-executes the faulting instruction under it; a sent or raised signal
    // (abort's) is raised again.
    for (std::size_t i = 0; i < std::size(kSignals); ++i)
      if (kSignals[i] == signal_number) ::sigaction(signal_number, &handler_text().previous[i], nullptr);
    if (info == nullptr || info->si_code <= 0) ::raise(signal_number); // sent, not a fault: resend
    return;
  }
  put("\nhost: plugin crash: component '");
  put(call.id);
  put("' crashed the process with ");
  put(signal_name(signal_number));
  put_call_place(call);
  put_advice_and_exit(call, call.index != UINT64_MAX ? ". This is a bug in the plugin"
                                                     : ". This is a bug in the plugin (or in LibTorch code it called)");
}

/// The calling thread's alternate signal stack, where the handler runs when a plugin's runaway
/// recursion has used the thread's own stack up (without one, the kernel cannot deliver SIGSEGV
/// and kills the process: a bare exit 139 instead of the crash report). Made on the thread's first
/// plugin call; a thread that already has one (ASan gives every thread its own) keeps it. Freed at
/// the thread's exit.
class AltStack {
 public:
  void ensure() noexcept {
    if (ready_) return;
    ready_ = true;
    stack_t current{};
    if (::sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE) == 0) return;
    // MINSIGSTKSZ plus room for the handler's few frames and write(2); a guard page below.
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    size_ = std::max<std::size_t>(std::size_t{64} * 1024, static_cast<std::size_t>(::sysconf(_SC_MINSIGSTKSZ)) * 4);
    void* memory = ::mmap(nullptr, size_ + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (memory == MAP_FAILED) return; // no report on overflow then, as before
    ::mprotect(memory, page, PROT_NONE);
    stack_t stack{};
    stack.ss_sp = static_cast<char*>(memory) + page;
    stack.ss_size = size_;
    if (::sigaltstack(&stack, nullptr) != 0) {
      ::munmap(memory, size_ + page);
      return;
    }
    memory_ = memory;
  }
  ~AltStack() {
    if (memory_ == nullptr) return;
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    ::sigaltstack(&off, nullptr);
    ::munmap(memory_, size_ + static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)));
  }

 private:
  bool ready_ = false;
  void* memory_ = nullptr;
  std::size_t size_ = 0;
};
thread_local AltStack t_alt_stack;

}  // namespace

PluginCallScope::PluginCallScope(const char* component_id, const char* function, uint64_t index, uint64_t epoch,
                                 const char* library) noexcept
    : previous_id_(t_call.id), previous_function_(t_call.function), previous_index_(t_call.index),
      previous_epoch_(t_call.epoch), previous_library_(t_call.library) {
  t_alt_stack.ensure();
  t_call.function = function;
  t_call.index = index;
  t_call.epoch = epoch;
  t_call.library = library;
  // The id last: a signal between the stores sees either the old call or the complete new one.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_call.id = component_id;
}

PluginCallScope::~PluginCallScope() {
  t_call.id = previous_id_;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_call.function = previous_function_;
  t_call.index = previous_index_;
  t_call.epoch = previous_epoch_;
  t_call.library = previous_library_;
}

const char* current_plugin_call() noexcept { return t_call.id; }

void end_exit_inside_plugin_call(int status) noexcept {
  const CallSlot call = t_call;
  if (call.id == nullptr) return; // the host's own exit, or LibTorch's
  put("\nhost: plugin exit: component '");
  put(call.id);
  put("' ended the process with exit(");
  put_number(static_cast<uint64_t>(static_cast<unsigned>(status)));
  put(")");
  put_call_place(call);
  put_advice_and_exit(call, ". A plugin must fail the call with a status instead (PLG-7)");
}

void install_plugin_crash_handler(const char* checkpoint_dir, const char* config_file) {
  HandlerText& text = handler_text();
  // Escaped here, where allocating is allowed: an output directory holding ESC or a newline
  // retitled the terminal and forged lines through the report (security trial F7).
  const std::string checkpoints = escape_control_characters(checkpoint_dir != nullptr ? checkpoint_dir : "", false);
  const std::string config = escape_control_characters(config_file != nullptr ? config_file : "RUN/config.toml", false);
  std::strncpy(text.checkpoint_dir, checkpoints.c_str(), sizeof text.checkpoint_dir - 1);
  std::strncpy(text.config_file, config.c_str(), sizeof text.config_file - 1);
  struct sigaction action {};
  action.sa_sigaction = &on_fatal_signal;
  action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK; // on the thread's alternate stack (AltStack)
  sigemptyset(&action.sa_mask);
  for (std::size_t i = 0; i < std::size(kSignals); ++i) {
    struct sigaction current {};
    ::sigaction(kSignals[i], nullptr, &current);
    if (current.sa_sigaction == &on_fatal_signal) continue; // already installed
    text.previous[i] = current;
    ::sigaction(kSignals[i], &action, nullptr);
  }
}

}  // namespace tp
