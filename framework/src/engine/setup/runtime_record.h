// runtime.toml as a training run assembles it (docs/run_directory.md): the settings at start-up
// (runtime_toml_text), the provenance (replaced when a resume learns the run's earlier
// processes), then data.decode's table, then run.cuda_graphs' (kept last, replaced when the step
// runner's choice changes). The file is written only once the run has started, so a
// start-up that fails leaves the runtime.toml of the run that trained as it was.
#pragma once

#include <string>
#include <utility>

namespace tp {

class RuntimeRecord {
 public:
  /// `settings`: runtime_toml_text's; empty where this process writes no runtime.toml (a rank other
  /// than 0, train.fast_dev_run): then nothing is kept and text() stays empty.
  /// `provenance`: provenance_toml's text, kept apart so that set_provenance can replace it.
  explicit RuntimeRecord(std::string settings = "", std::string provenance = "")
      : settings_(std::move(settings)), provenance_(std::move(provenance)) {}

  /// A table learnt at start-up (data.decode's [decode]), after what is there.
  void add(const std::string& table) {
    if (!settings_.empty()) tables_ += "\n" + table;
  }
  /// The provenance with the run's earlier processes, learnt at --resume: replaces the one given.
  void set_provenance(std::string provenance) { provenance_ = std::move(provenance); }
  /// run.cuda_graphs' table, always the file's last; a new one replaces the old.
  void set_cuda_graphs(std::string table) { cuda_graphs_ = std::move(table); }
  /// The run has started: the file follows the record from now on.
  void start() noexcept { started_ = true; }
  /// The file's whole text, or "" while none is to be written (not started, or no settings).
  std::string text() const {
    if (!started_ || settings_.empty()) return "";
    return settings_ + (provenance_.empty() ? "" : "\n" + provenance_) + tables_ +
           (cuda_graphs_.empty() ? "" : "\n" + cuda_graphs_);
  }

 private:
  std::string settings_;
  std::string provenance_;
  std::string tables_; ///< add()'s, each after a blank line
  std::string cuda_graphs_;
  bool started_ = false;
};

}  // namespace tp
