// A training run tracked on an MLflow server (`[logging.mlflow]`, docs/experiment_tracking.md),
// by rank 0, without ever slowing or failing the training:
//   - start-up (the constructor) checks the settings and reaches the server once: a wrong URI
//     scheme, or a server that refuses (a bad token, a missing permission, an experiment name it
//     rejects) stops the command with a ConfigError (exit 2) before anything trains; a server
//     that does not answer is a warning, and the run is created when it does;
//   - while training, a thread of its own reads the records the trainer appends to history.jsonl
//     every flush_seconds and sends them (runs/log-batch), retrying with backoff while the server
//     does not answer; the training thread never waits on it and holds no queue for it: the
//     history file is the queue, so a long outage costs no memory;
//   - end() sends what is left, the artifacts and the status (FINISHED, FAILED, KILLED), waiting
//     at most finish_timeout_seconds (a transfer still running then is abandoned, whatever the
//     server does), and says what could not be sent; `host mlflow-sync <run dir>`
//     sends it later (<run dir>/mlflow/state.toml records how far the server is).
// Example (host train):
//   MlflowTracker tracker(config, run_dir, trainer.run_id(), /*resumed=*/true, log);
//   ... trainer.fit() ...
//   tracker.end(MlflowEnd::kFinished);
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/config/run_config.h"

namespace tp {

class Logger;

/// How a run ended, as MLflow's run status.
enum class MlflowEnd { kFinished, kFailed, kKilled };

class MlflowTracker {
 public:
  /// Starts tracking the run in `run_dir` (config.toml and, once the trainer was built,
  /// runtime.toml written; the history resumed). `torchhost_run_id` is run.id; `resumed`: this
  /// process continues an earlier one in the directory (--resume), so its MLflow run continues
  /// too: the records the server has up to the resume point are not sent again, and those after
  /// it (a discarded attempt's) are, as the run trains them anew. Throws ConfigError (exit 2) as
  /// the file comment says.
  MlflowTracker(const RunConfig& config, std::filesystem::path run_dir, std::string torchhost_run_id, bool resumed,
                Logger& log);
  /// Stops the sender, abandoning the request in flight (within about a second); a run that did not
  /// call end() keeps its MLflow status (RUNNING) and its state file, for a resume or a sync.
  ~MlflowTracker();
  MlflowTracker(const MlflowTracker&) = delete;
  MlflowTracker& operator=(const MlflowTracker&) = delete;

  /// The run ended: sends what is left, the artifacts and `how`, within finish_timeout_seconds
  /// (plus about a second: the transfer in flight then is abandoned at the deadline),
  /// then logs the run's page or what was left unsent. Call once.
  void end(MlflowEnd how);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// `host mlflow-sync RUN_DIR`: sends what `run_dir`'s MLflow run lacks (the run itself, params,
/// history, and once the training ended, artifacts and status), from the files alone, with the
/// connection of its config.toml and the environment. A directory whose run was never tracked
/// gets a new MLflow run with everything. Returns 0 when the server has it all, 1 when something
/// could not be sent (logged). Throws ConfigError for a directory without a run, or with a
/// training running in it, a state file naming a server other than the configured one (the
/// config's, else MLFLOW_TRACKING_URI: the credentials go only there), or one whose records_sent
/// exceeds history.jsonl's records.
int sync_mlflow_run(const std::filesystem::path& run_dir, Logger& log);

/// `host eval --mlflow`: logs `metrics` as "<prefix>/<name>" at optimizer step `step` to the MLflow
/// run `run_dir` is tracked in (its mlflow/state.toml), on the server `section` (host eval's own
/// configuration) and the environment name, with the environment's credentials. Throws
/// ConfigError when the directory has no MLflow run or its state file names another server (the
/// credentials go only to the configured one), tp::Error when the server does not take the
/// metrics (the evaluation's own file is written before).
void log_eval_to_mlflow(const MlflowSection& section, const std::filesystem::path& run_dir, const std::string& prefix,
                        const std::vector<std::pair<std::string, double>>& metrics, int64_t step, Logger& log);

/// `host sweep`'s parent run in `sweep_dir` (its state in <sweep dir>/mlflow/state.toml), named
/// `name`, in the experiment of `config` (the first cell's): created once, continued when the
/// sweep is run again. Each cell's run names it as logging.mlflow.parent_run_id, which is how the
/// MLflow UI nests runs. Returns its id, or "" when the server does not answer (a warning; the
/// cells are then tracked without a parent). Throws ConfigError when the server refuses.
std::string start_mlflow_parent_run(const RunConfig& config, const std::filesystem::path& sweep_dir,
                                    const std::string& name, Logger& log);
/// Sets the parent run's status (every cell finished, one failed, or a signal stopped the sweep).
/// A failure is a warning.
void end_mlflow_parent_run(const RunConfig& config, const std::filesystem::path& sweep_dir, MlflowEnd how, Logger& log);

}  // namespace tp
