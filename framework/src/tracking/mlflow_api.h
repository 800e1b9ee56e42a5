// MLflow's REST API (/api/2.0/mlflow/..., and the artifact proxy /api/2.0/mlflow-artifacts/...),
// the calls a run needs, each one request. A failure throws ApiError, which says whether trying
// again later may succeed (no answer, 429, 5xx) or the server refused for good (any other 4xx).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tp/framework/error.h"
#include "tracking/mlflow_http.h"
#include "tracking/mlflow_payload.h"

namespace tp::mlflow {

/// A failed call: `transient` when the same call may succeed later; `unexpected` when the answer
/// was not MLflow's (not JSON, no run in it, larger than kMaxAnswerBytes): the address is not an
/// MLflow tracking server's API, which no credential fixes.
class ApiError : public Error {
 public:
  ApiError(const std::string& message, bool transient, long status, bool unexpected = false)
      : Error(message), transient_(transient), status_(status), unexpected_(unexpected) {}
  bool transient() const { return transient_; }
  long status() const { return status_; }
  bool unexpected() const { return unexpected_; }

 private:
  bool transient_;
  long status_;
  bool unexpected_;
};

/// What the server says about a run.
struct RunInfo {
  std::string run_id;
  std::string experiment_id;
  std::string artifact_uri; ///< "mlflow-artifacts:/<experiment>/<run>/artifacts" when the server proxies artifacts
  std::string status;       ///< "RUNNING", "FINISHED", "FAILED", "KILLED", "SCHEDULED"
  std::string lifecycle_stage; ///< "active" | "deleted"
};

/// The calls. Thread safety: [one thread] (it uses one HttpClient).
class Api {
 public:
  explicit Api(HttpClient& http) : http_(http) {}
  /// The id of experiment `name`, created when it does not exist. A deleted experiment of that
  /// name is an ApiError (not transient): MLflow keeps its name until it is purged.
  std::string experiment_id(const std::string& name);
  /// Creates a run in `experiment_id` (tags: mlflow.runName and the caller's).
  RunInfo create_run(const std::string& experiment_id, const std::string& run_name, int64_t start_ms,
                     const std::vector<KeyValue>& tags);
  RunInfo get_run(const std::string& run_id);
  /// One runs/log-batch request (a body from log_batch_bodies()).
  void log_batch(const std::string& body);
  /// Sets the run's status ("RUNNING", "FINISHED", "FAILED", "KILLED"); `end_ms` 0 = none.
  void update_run(const std::string& run_id, const std::string& status, int64_t end_ms);
  /// Uploads `file` as <artifact_uri>/<relative> through the server's artifact proxy. An
  /// artifact_uri the proxy does not serve (s3://, a local path: the server was started with
  /// --no-serve-artifacts) is an ApiError saying so.
  void upload_artifact(const std::string& artifact_uri, const std::string& relative, const std::filesystem::path& file);

 private:
  std::string server() const { return http_.connection().tracking_uri; }
  HttpClient& http_;
};

}  // namespace tp::mlflow
