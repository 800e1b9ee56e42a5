#include "tracking/mlflow_state.h"

#include <sstream>
#include <system_error>

#include <toml++/toml.h>

#include "tp/framework/config/secrets.h"
#include "tp/framework/config/toml_text.h"
#include "tp/framework/error.h"
#include "tp/framework/util/atomic_file.h"
#include "tp/framework/util/own_directory.h"

namespace tp::mlflow {
namespace {

template <class T>
T value_or_fail(const toml::table& table, const char* key, T fallback, const std::filesystem::path& file) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return fallback;
  const std::optional<T> value = node->value<T>();
  if (!value)
    throw Error(file.string() + ": `" + key + "` has the wrong type. The file records which MLflow run this "
                "directory is tracked in; delete it to have the next run or `host mlflow-sync` start a new "
                "MLflow run (history.jsonl and the checkpoints are untouched).");
  return *value;
}

}  // namespace

std::filesystem::path state_file(const std::filesystem::path& run_dir) { return run_dir / "mlflow" / "state.toml"; }

State read_state(const std::filesystem::path& run_dir) {
  const std::filesystem::path file = state_file(run_dir);
  std::error_code missing;
  if (!std::filesystem::exists(file, missing)) return {};
  toml::table table;
  try {
    table = parse_toml_file(file);
  } catch (const toml::parse_error& e) {
    std::ostringstream where;
    where << e.source().begin;
    throw Error(file.string() + " is not valid TOML (" + std::string(e.description()) + " at " + where.str() +
                "). Delete it to have the next run or `host mlflow-sync` start a new MLflow run (history.jsonl "
                "and the checkpoints are untouched).");
  }
  State s;
  s.torchhost_run_id = value_or_fail<std::string>(table, "torchhost_run_id", "", file);
  s.tracking_uri = value_or_fail<std::string>(table, "tracking_uri", "", file);
  s.experiment_id = value_or_fail<std::string>(table, "experiment_id", "", file);
  s.run_id = value_or_fail<std::string>(table, "run_id", "", file);
  s.artifact_uri = value_or_fail<std::string>(table, "artifact_uri", "", file);
  s.params_sent = value_or_fail<bool>(table, "params_sent", false, file);
  s.records_sent = value_or_fail<int64_t>(table, "records_sent", 0, file);
  if (s.records_sent < 0) throw Error(file.string() + ": records_sent is negative; delete the file to start afresh.");
  s.end_status = value_or_fail<std::string>(table, "end_status", "", file);
  s.artifacts_sent = value_or_fail<bool>(table, "artifacts_sent", false, file);
  s.status_sent = value_or_fail<bool>(table, "status_sent", false, file);
  return s;
}

void write_state(const std::filesystem::path& run_dir, const State& s) {
  // The server's address only: a URI's credentials never reach the file (secrets.h).
  const toml::table table{{"torchhost_run_id", s.torchhost_run_id},
                          {"tracking_uri", redact_uri_credentials(s.tracking_uri)},
                          {"experiment_id", s.experiment_id},
                          {"run_id", s.run_id},
                          {"artifact_uri", s.artifact_uri},
                          {"params_sent", s.params_sent},
                          {"records_sent", s.records_sent},
                          {"end_status", s.end_status},
                          {"artifacts_sent", s.artifacts_sent},
                          {"status_sent", s.status_sent}};
  std::ostringstream text;
  text << "# The MLflow run this directory is tracked in (docs/experiment_tracking.md); written by torchhost.\n"
       << table << "\n";
  // Made by the host and never through a link planted in its place during the run (the start
  // refuses one already there): the state names the server and the run (security trial F6).
  make_own_directory(run_dir / "mlflow");
  write_file_atomically(state_file(run_dir), text.str());
}

}  // namespace tp::mlflow
