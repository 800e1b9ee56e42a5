// Bringing an MLflow run up to date with a run directory: the one piece of logic behind the live
// sender (mlflow_tracker.cpp, on its own thread during training) and `host mlflow-sync` (later,
// from the files alone). Each step sends what the state file says the server lacks and records
// it there once the server has it, so an interrupted sync (a dead server, a killed process)
// resumes where it stopped:
//   1. the run: the experiment (created when missing) and the MLflow run, with its tags;
//   2. the params (config.toml's every scalar) and the provenance tags (runtime.toml);
//   3. the history: history.jsonl's records after the first `records_sent`, as metrics;
//   4. at the end, the artifacts: config.toml, runtime.toml, history.jsonl, plots/*.png and, with
//      log_checkpoints = "best", checkpoints/best.pt;
//   5. at the end, the status (before step 4 for KILLED: a stopped run has seconds left).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tp/framework/config/run_config.h"
#include "tracking/mlflow_api.h"
#include "tracking/mlflow_state.h"

namespace tp::mlflow {

/// What the run is tracked as: [logging.mlflow] with run.name, as the run's config.toml holds them.
struct RunSettings {
  MlflowSection section;
  std::string run_name; ///< logging.mlflow.run_name, or run.name when that is ""
};

/// The settings of the run in `run_dir` with configuration `config`. The run's name is
/// logging.mlflow.run_name, else the run directory's name for a sweep's cell (a child run: its
/// directory is named after its settings, "optim.lr=0.003"), else run.name.
RunSettings settings_from(const RunConfig& config, const std::filesystem::path& run_dir);

/// One run directory and its MLflow run. Thread safety: [one thread].
class RunSync {
 public:
  RunSync(std::filesystem::path run_dir, RunSettings settings, State state, HttpClient& http);

  /// Step 1 when the state has no run yet (nothing else otherwise). Throws ApiError.
  void ensure_run();
  /// Steps 1-3: everything history.jsonl holds now. Returns the records sent by this call. Throws ApiError.
  int64_t send_history();
  /// Steps 1-5, with state().end_status set: all of it. Throws ApiError.
  void send_end();
  /// Sets the run RUNNING again (a resumed run whose MLflow run had ended). Throws ApiError.
  void reopen();
  /// Marks the end: `status` is "FINISHED", "FAILED" or "KILLED"; written to the state file.
  void set_end_status(const std::string& status);

  const State& state() const { return state_; }
  /// Complete records in history.jsonl now (what a full sync would have sent).
  int64_t records_available();
  /// The web page of the run: <tracking_uri>/#/experiments/<e>/runs/<r>; "" before it exists.
  std::string run_page() const;

 private:
  void save() { write_state(run_dir_, state_); }
  void send_params();
  void send_artifacts();
  /// Complete lines of history.jsonl from line `first`; `offset_` caches where line `line_at_offset_` starts.
  std::vector<std::string> history_lines_from(int64_t first);

  std::filesystem::path run_dir_;
  RunSettings settings_;
  State state_;
  HttpClient& http_;
  Api api_;
  int64_t offset_ = 0;
  int64_t line_at_offset_ = 0;
  std::map<int64_t, int64_t> first_read_ms_; ///< history line -> when it was first read, until sent
};

/// The milliseconds since the Unix epoch now (MLflow's timestamps).
int64_t now_ms();
/// Complete lines (ending in '\n') of `file`: 0 when it does not exist.
int64_t count_complete_lines(const std::filesystem::path& file);

}  // namespace tp::mlflow
