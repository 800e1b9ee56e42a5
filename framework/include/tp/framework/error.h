// Errors inside the framework and host (ARCH-2). Internal code throws; host/main.cpp
// catches at the top and maps each type to a distinct exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace tp {

/// Process exit codes of `host`: the only definition. docs/commands.md ("Exit codes") and
/// docs/architecture.md list the same table; scripts and schedulers branch on these values, so
/// a value never changes meaning.
enum ExitCode : int {
  kExitOk = 0,             ///< success (also `--help`)
  kExitRuntime = 1,        ///< a runtime failure: I/O, a full disk, a plugin call failing, a non-finite loss
  kExitConfig = 2,         ///< a usage or configuration error (ConfigError; the message names the key)
  kExitPlugin = 3,         ///< a plugin could not be loaded: ABI, fingerprint, init, schema (PluginLoadError)
  kExitCheckpoint = 4,     ///< a checkpoint is missing, unreadable, truncated or damaged (CheckpointError)
  kExitPluginCrash = 5,    ///< a plugin crashed the process: a fatal signal inside a plugin call (plugin_crash.h)
  kExitVerifyFailed = 6,   ///< `host verify`: a check failed (its table row names it; docs/verify.md)
  kExitLaunchFailed = 127, ///< the launcher could not start a rank (exec failed; the shell's convention)
  kExitSignalBase = 128    ///< stopped by signal N: 128 + N (130 SIGINT / 143 SIGTERM after saving)
};

/// The exit code for "stopped by signal `signal_number`": kExitSignalBase + signal_number, as a
/// shell reports a process killed by that signal (130 for SIGINT, 143 for SIGTERM).
constexpr int exit_code_for_signal(int signal_number) { return kExitSignalBase + signal_number; }

/// Base of every torchhost error. The message is one paragraph: what, where, what to do.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  /// The exit code `host` uses for this error.
  virtual int exit_code() const noexcept { return kExitRuntime; }
};

/// A configuration or usage problem. `key_path` is the dotted key ("train.batch_size"), or empty.
class ConfigError : public Error {
 public:
  ConfigError(std::string key_path, const std::string& message)
      : Error(message), key_path_(std::move(key_path)) {}
  const std::string& key_path() const noexcept { return key_path_; }
  int exit_code() const noexcept override { return kExitConfig; }

 private:
  std::string key_path_;
};

/// A plugin failed to load, negotiate or validate (exit 3).
class PluginLoadError : public Error {
 public:
  using Error::Error;
  int exit_code() const noexcept override { return kExitPlugin; }
};

/// A plugin call returned an error status at run time (exit 1). Carries who and what. A
/// TP_ERR_CONFIG from `create` or `prepare` is the component's table being unusable (a dataset's
/// path outside its root, a key out of range): a configuration error, exit 2, as the exit-code
/// table says of every configuration error; the same status from a later call (a sample, a
/// batch) stays a runtime failure, exit 1.
class PluginError : public Error {
 public:
  /// `status` is the tp_status the plugin returned (plugin_api/include/tp/status.h; 7 =
  /// TP_ERR_INTERNAL where the host has no status to give).
  PluginError(std::string component_id, std::string function, const std::string& message, int status = 7)
      : Error(message), component_id_(std::move(component_id)), function_(std::move(function)), status_(status) {}
  const std::string& component_id() const noexcept { return component_id_; }
  const std::string& function() const noexcept { return function_; }
  /// The tp_status of the failed call: TP_ERR_OUT_OF_MEMORY (5) tells train.on_oom a plugin's
  /// forward ran out of memory.
  int status() const noexcept { return status_; }
  int exit_code() const noexcept override {
    constexpr int kConfigStatus = 2; // TP_ERR_CONFIG (plugin_api/include/tp/status.h)
    return status_ == kConfigStatus && (function_ == "create" || function_ == "prepare") ? kExitConfig : kExitRuntime;
  }

 private:
  std::string component_id_;
  std::string function_;
  int status_;
};

}  // namespace tp

/// Throws tp::Error with the streamed message when `cond` is false.
#define TP_CHECK(cond, ...)                                              \
  do {                                                                   \
    if (!(cond)) throw ::tp::Error(::tp::detail::concat(__VA_ARGS__));   \
  } while (0)

#include <sstream>
namespace tp::detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace tp::detail
