// <run dir>/mlflow/state.toml: which MLflow run a run directory is tracked in and how much of it
// the server has. history.jsonl itself is what waits to be sent (its first `records_sent` records
// are on the server), so nothing is kept twice and `host mlflow-sync` can finish any run's
// tracking later. Written atomically by rank 0 after every request that moved something; read
// back as untrusted input (a damaged file is an error naming it, never a crash).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace tp::mlflow {

struct State {
  std::string torchhost_run_id; ///< the run.id this state belongs to (a new run in the directory starts afresh)
  std::string tracking_uri;
  std::string experiment_id;    ///< "" until the server was reached
  std::string run_id;           ///< the MLflow run; "" until created
  std::string artifact_uri;
  bool params_sent = false;     ///< the config's params and the provenance tags
  int64_t records_sent = 0;     ///< history.jsonl records on the server (lines, from the first)
  std::string end_status;       ///< "" while training; "FINISHED", "FAILED" or "KILLED" once it ended
  bool artifacts_sent = false;
  bool status_sent = false;
  bool operator==(const State&) const = default;
};

/// <run dir>/mlflow/state.toml
std::filesystem::path state_file(const std::filesystem::path& run_dir);
/// The state in `run_dir`, or nullopt-like empty State (run_id "") when there is no file. Throws
/// tp::Error naming the file when it cannot be parsed or a value has the wrong type.
State read_state(const std::filesystem::path& run_dir);
/// Writes the state atomically (creating <run dir>/mlflow). Throws tp::Error naming the file.
void write_state(const std::filesystem::path& run_dir, const State& state);

}  // namespace tp::mlflow
