#include "tracking/mlflow_api.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tp/framework/util/bounded_json.h"

namespace tp::mlflow {
namespace {

// The error_code MLflow puts in a refusal's body ("RESOURCE_DOES_NOT_EXIST"), or "".
std::string error_code(const Response& response) {
  const auto body = parse_bounded_json(response.body);
  if (body.is_object() && body.contains("error_code") && body["error_code"].is_string())
    return body["error_code"].get<std::string>();
  return "";
}

[[noreturn]] void fail(const std::string& what, const Response& response) {
  std::string hint;
  if (response.status == 401) hint = " (check MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and _PASSWORD)";
  if (response.status == 403) hint = " (the credentials lack a permission on this experiment or run)";
  if (response.status == 404 && error_code(response).empty())
    hint = " (no MLflow API at this address: logging.mlflow.tracking_uri names the server's root, as `mlflow "
           "server` prints it)";
  throw ApiError(what + ": " + response.describe() + hint, response.transient(), response.status, response.too_large);
}

// An answer that is not MLflow's JSON: a web page, a proxy's login form, binary. Said as such (not
// as a refusal of the credentials), with a short printable excerpt of what came.
[[noreturn]] void unexpected(const std::string& what, const std::string& server, const Response& response,
                             const std::string& problem) {
  throw ApiError(what + ": the server at " + server + " answered HTTP " + std::to_string(response.status) + " with " +
                     problem + ", so it is not an MLflow tracking server's API (or logging.mlflow.tracking_uri names "
                     "a page in front of one: give the server's root, as `mlflow server` prints it). The answer " +
                     "began: \"" + printable_excerpt(response.body) + "\"",
                 /*transient=*/false, response.status, /*unexpected=*/true);
}

nlohmann::json parse_answer(const std::string& what, const std::string& server, const Response& response) {
  auto body = parse_bounded_json(response.body);
  if (!body.is_object()) unexpected(what, server, response, "something other than MLflow's JSON");
  return body;
}

std::string string_at(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_string()) return "";
  return object[key].get<std::string>();
}

// Whether `id` (a run or experiment id from the server) is one: letters, digits, '-', '_' and '.',
// at most 64 (MLflow's run ids are 32 hex digits, its experiment ids decimal). The ids reach the
// console, train.log and state.toml; a server that answers with ESC or a newline in one forged
// lines there (security trial F9).
bool plain_id(std::string_view id) {
  return !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return std::isalnum(c) != 0 || ch == '-' || ch == '_' || ch == '.';
  });
}

// `id` when it is plain_id; otherwise the answer is not MLflow's (an empty id: "names no <key>").
std::string checked_id(std::string id, const char* key, const std::string& what, const std::string& server,
                       const Response& response) {
  if (id.empty()) unexpected(what, server, response, std::string("JSON that names no ") + key);
  if (!plain_id(id))
    unexpected(what, server, response,
               std::string("a ") + key + " that is no id (\"" + printable_excerpt(id, 64) +
                   "\"; an id is letters, digits, '-', '_' and '.')");
  return id;
}

RunInfo run_info(const std::string& what, const std::string& server, const Response& response) {
  const nlohmann::json body = parse_answer(what, server, response);
  const nlohmann::json& run = body.contains("run") && body["run"].is_object() ? body["run"] : nlohmann::json::object();
  const nlohmann::json info = run.contains("info") ? run["info"] : nlohmann::json();
  if (string_at(info, "run_id").empty()) unexpected(what, server, response, "JSON that names no run");
  RunInfo out{checked_id(string_at(info, "run_id"), "run_id", what, server, response), string_at(info, "experiment_id"),
              string_at(info, "artifact_uri"), string_at(info, "status"), string_at(info, "lifecycle_stage")};
  if (!out.experiment_id.empty())
    out.experiment_id = checked_id(out.experiment_id, "experiment_id", what, server, response);
  return out;
}

constexpr std::string_view kProxyScheme = "mlflow-artifacts:";

}  // namespace

std::string Api::experiment_id(const std::string& name) {
  const std::string what = "mlflow: experiment \"" + name + "\"";
  Response found = http_.get("/api/2.0/mlflow/experiments/get-by-name?experiment_name=" + url_escape(name, false));
  if (found.ok()) {
    const nlohmann::json body = parse_answer(what, server(), found);
    const nlohmann::json experiment = body.contains("experiment") ? body["experiment"] : nlohmann::json();
    if (string_at(experiment, "lifecycle_stage") == "deleted")
      throw ApiError(what + " was deleted on the server, which keeps its name until it is purged: restore it "
                            "(`mlflow experiments restore`), or choose another logging.mlflow.experiment",
                     /*transient=*/false, found.status);
    return checked_id(string_at(experiment, "experiment_id"), "experiment_id", what, server(), found);
  }
  if (error_code(found) != "RESOURCE_DOES_NOT_EXIST") fail(what, found);
  Response created = http_.post_json("/api/2.0/mlflow/experiments/create", nlohmann::json({{"name", name}}).dump());
  if (!created.ok()) fail(what + " could not be created", created);
  return checked_id(string_at(parse_answer(what, server(), created), "experiment_id"), "experiment_id", what, server(),
                    created);
}

RunInfo Api::create_run(const std::string& experiment_id, const std::string& run_name, int64_t start_ms,
                        const std::vector<KeyValue>& tags) {
  nlohmann::json tag_list = nlohmann::json::array();
  for (const auto& tag : tags) tag_list.push_back({{"key", tag.key}, {"value", tag.value}});
  const nlohmann::json body = {{"experiment_id", experiment_id}, {"run_name", run_name},
                               {"start_time", start_ms}, {"tags", tag_list}};
  Response response = http_.post_json("/api/2.0/mlflow/runs/create", body.dump());
  if (!response.ok()) fail("mlflow: creating a run in experiment " + experiment_id, response);
  return run_info("mlflow: creating a run", server(), response);
}

RunInfo Api::get_run(const std::string& run_id) {
  Response response = http_.get("/api/2.0/mlflow/runs/get?run_id=" + url_escape(run_id, false));
  if (!response.ok()) fail("mlflow: run " + run_id, response);
  return run_info("mlflow: run " + run_id, server(), response);
}

void Api::log_batch(const std::string& body) {
  Response response = http_.post_json("/api/2.0/mlflow/runs/log-batch", body);
  if (!response.ok()) fail("mlflow: runs/log-batch", response);
}

void Api::update_run(const std::string& run_id, const std::string& status, int64_t end_ms) {
  nlohmann::json body = {{"run_id", run_id}, {"status", status}};
  if (end_ms > 0) body["end_time"] = end_ms;
  Response response = http_.post_json("/api/2.0/mlflow/runs/update", body.dump());
  if (!response.ok()) fail("mlflow: setting run " + run_id + " to " + status, response);
}

void Api::upload_artifact(const std::string& artifact_uri, const std::string& relative, const std::filesystem::path& file) {
  if (artifact_uri.compare(0, kProxyScheme.size(), kProxyScheme) != 0)
    throw ApiError("mlflow: the run's artifact store is " + printable_excerpt(artifact_uri) +
                       ", which this client cannot write: it uploads through the server's artifact proxy. Start "
                       "the server with --serve-artifacts (the default) and --artifacts-destination",
                   /*transient=*/false, 0);
  std::string path = artifact_uri.substr(kProxyScheme.size());
  while (!path.empty() && path.front() == '/') path.erase(0, 1);
  Response response =
      http_.put_file("/api/2.0/mlflow-artifacts/artifacts/" + url_escape(path + "/" + relative, true), file);
  if (!response.ok()) fail("mlflow: uploading " + relative, response);
}

}  // namespace tp::mlflow
