// What `host tune lr` and `host tune batch-size` share (docs/tune.md): the checked configuration,
// the scratch directory under the run directory that the throwaway child runs write into, the
// child's `host train` command line, and reading a child's output back for an error message.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "session.h"

namespace tp::cli {

/// Opens the session for a tune: refuses a distributed start (RANK/WORLD_SIZE set: a tune starts
/// its own children), loads the user's configuration (the file, environment mirrors and --set)
/// with every plugin and component table, checks the precision on the device, then loads it once
/// more with `tune_sets` appended, so a key the children will get that clashes with the
/// configuration fails here, before any child starts. Throws ConfigError naming the key (exit 2)
/// and, for the plugins, PluginLoadError (exit 3). `what` names the command in messages
/// ("host tune lr").
std::unique_ptr<Session> open_tune_session(const Options& options, const std::vector<std::string>& tune_sets,
                                           const std::string& what);

/// A fresh directory `<run dir>/tune/<name>-<YYYYmmdd-HHMMSS>` (with -2, -3 ... when taken) for
/// a tune's child runs; they never write anywhere else, so the run's own checkpoints, history and
/// plots are not touched. Remembers which of the run directory and its tune/ it had to create.
/// Not thread-safe; [main].
class ScratchDir {
 public:
  /// Creates the directory. Throws tp::Error naming it when it cannot.
  ScratchDir(const std::filesystem::path& run_dir, const std::string& name);
  const std::filesystem::path& path() const noexcept { return path_; }
  /// Removes the scratch directory, then tune/ and the run directory when this object created
  /// them and they are empty, and gives the directory they were made in its modification time
  /// back: the run directory is left as it was before the tune (a stopped tune). Never throws;
  /// what cannot be removed stays.
  void discard() noexcept;

 private:
  std::filesystem::path path_;
  std::vector<std::filesystem::path> created_; ///< the directories created above path_, innermost first
  std::filesystem::path parent_;               ///< the existing directory the first new one went into
  struct timespec parent_times_[2] = {};       ///< its access and modification times before
};

/// `host train --config FILE --set ...  --output-dir OUT [--plugin-dir DIR]...`: the user's --set
/// first, then `tune_sets`, which win where both name a key. args[0] is "host".
std::vector<std::string> child_train_command(const Options& options, const std::vector<std::string>& tune_sets,
                                             const std::filesystem::path& out_dir);

/// The last `lines` lines of `file`, indented for an error message ("" when it is unreadable).
std::string tail_of(const std::filesystem::path& file, int lines);

/// Says that `what` was stopped by `signal` before it wrote anything; returns 128 + signal.
int stopped_before_start(const std::string& what, int signal);

/// `value` as a paste-able TOML float with 2 significant digits: 3.2e-03.
std::string short_float(double value);

/// `host tune lr` (tune_lr.cpp): the learning-rate range test; prints the suggestion and writes
/// <run dir>/tune/lr_find.csv and lr_find.png.
int run_tune_lr(const Options& options);
/// `host tune batch-size` (tune_batch.cpp): the largest micro-batch that fits; prints the trials
/// and the --set lines and writes <run dir>/tune/batch_size.csv.
int run_tune_batch_size(const Options& options);

}  // namespace tp::cli
