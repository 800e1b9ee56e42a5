// Which plugin code was running when the process took a fatal signal.
//
// A plugin is native code in our address space: a bug in it (a NULL dereference in get_sample)
// kills the host with SIGSEGV, and a bare "Segmentation fault" says nothing about which of twenty
// plugins, which function or which sample. Before the host calls into a plugin it records the
// component id, function and sample index in a thread-local slot (PluginCallScope); the fatal-
// signal handler prints that slot with write(2) and exits with kExitPluginCrash (5).
//
// What "ends cleanly" can honestly mean here: after SIGSEGV the heap and the plugin's state may be
// corrupt, and nothing but async-signal-safe calls (write, _exit) may run, so the handler cannot
// serialise tensors or flush the history. It does not need to: checkpoints are written atomically
// (temporary file, fsync, rename), so the last periodic checkpoint is complete, and the message
// tells the user to `--resume auto` from it once the plugin is fixed (or the sample skipped).
// A fault outside any plugin call is a host bug: the handler then restores the default action and
// re-raises, so the usual core dump / sanitizer report still happens. SIGABRT is handled alike: an
// abort() (a failed assertion, std::terminate after an escaping C++ exception) on a thread inside a
// plugin call is that plugin's crash, exit 5; one outside any plugin call (LibTorch's or glibc's own
// checks in host code) or sent by another process keeps the default action (exit 134, core dump).
#pragma once

#include <cstdint>

#include "tp/framework/error.h"  // kExitPluginCrash

namespace tp {

/// Marks the calling thread as inside `function` of plugin component `component_id` (for a
/// dataset: `index` is the sample and `epoch` its 0-based ctx.epoch, else pass UINT64_MAX) until
/// destruction; `library` (a path, or nullptr) is the file the component comes from, named in the
/// command the crash report gives. The strings are borrowed and must outlive the scope. Cost:
/// five thread-local stores; no allocation, no lock,
/// except on a thread's first plugin call, which gives the thread an alternate signal stack (64 KiB)
/// so that a plugin's stack overflow still ends in the crash report, not a bare SIGSEGV.
/// Scopes nest (the previous one is restored).
///
/// Example:
///   PluginCallScope scope(id().c_str(), "get_sample", index);
///   status = table_.get_sample(self_, index, ...);
class PluginCallScope {
 public:
  PluginCallScope(const char* component_id, const char* function, uint64_t index, uint64_t epoch = UINT64_MAX,
                  const char* library = nullptr) noexcept;
  ~PluginCallScope();
  PluginCallScope(const PluginCallScope&) = delete;
  PluginCallScope& operator=(const PluginCallScope&) = delete;

 private:
  const char* previous_id_;
  const char* previous_function_;
  uint64_t previous_index_;
  uint64_t previous_epoch_;
  const char* previous_library_;
};

/// The component id (or, around dlopen, init and deinit, the library's file) of the innermost
/// PluginCallScope on the calling thread, or nullptr outside any: the plugin whose code is running
/// here, for host services that want to name their caller (host->log). Borrowed: valid while
/// that scope lives. One thread-local read.
const char* current_plugin_call() noexcept;

/// Called by the host executable's exit() (host/plugin_exit.cpp) before the C library's: on a
/// thread inside a PluginCallScope, exit() is that plugin's (PLG-7 forbids it), so this reports
/// it as a crash is reported (component, call, sample; in a run, the checkpoint to resume from)
/// and ends the process with _exit(kExitPluginCrash), before any exit handler or static
/// destructor runs under the threads still training. Returns outside any plugin call.
void end_exit_inside_plugin_call(int status) noexcept;

/// Runs `call()` (a call into plugin code: create, prepare, destroy, init, dlopen) inside a
/// PluginCallScope(component_id, function, no sample) and returns what it returns, so a crash
/// there is reported like one in a hot call: named, exit 5.
template <typename Call>
decltype(auto) in_plugin_call(const char* component_id, const char* function, Call&& call) {
  const PluginCallScope scope(component_id, function, UINT64_MAX);
  return call();
}

/// Installs the SIGSEGV/SIGBUS/SIGFPE/SIGILL/SIGABRT handler (idempotent: a later call only replaces the
/// two texts; main installs it for every command before any plugin is loaded, a run then names
/// its checkpoints). In a run, `checkpoint_dir` is named in the message as the resume point and
/// `config_file` (the run's self-contained config.toml) in the `host plugins check` command that
/// reproduces the crash; `host plugins check` itself passes nullptr for both. Both are copied
/// into fixed buffers (truncated at 1 KiB), since the handler may not allocate.
void install_plugin_crash_handler(const char* checkpoint_dir, const char* config_file = nullptr);

}  // namespace tp
