#include "tracking/mlflow_sync.h"

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include <toml++/toml.h>

#include "tp/framework/config/secrets.h"
#include "tp/framework/config/toml_text.h"
#include "tp/framework/report/history_line.h"

namespace tp::mlflow {
namespace {

// The provenance tags come from runtime.toml (versions, git, plugin hashes, devices); a run
// without one (it stopped before the trainer was built) has none. An environment variable's value
// goes only where provenance would record it now (secrets.h): a runtime.toml written before it did
// (`host mlflow-sync` of an old run) still sends TP_MY_TOKEN by name alone.
std::vector<KeyValue> runtime_tags(const std::filesystem::path& run_dir) {
  const std::filesystem::path file = run_dir / "runtime.toml";
  std::error_code missing;
  if (!std::filesystem::exists(file, missing)) return {};
  try {
    std::vector<KeyValue> tags = runtime_tags_from_table(parse_toml_file(file)).entries;
    static constexpr std::string_view kEnvironment = "torchhost.provenance.environment.";
    for (KeyValue& tag : tags)
      if (tag.key.starts_with(kEnvironment) &&
          !environment_value_recordable(std::string_view(tag.key).substr(kEnvironment.size())))
        tag.value = kUnrecordedValue;
    return tags;
  } catch (const toml::parse_error&) {
    return {}; // a damaged runtime.toml costs the tags, not the run's tracking
  }
}

std::vector<KeyValue> run_tags(const RunSettings& settings, const State& state) {
  std::vector<KeyValue> tags{{"mlflow.runName", settings.run_name},
                             {"mlflow.source.name", "torchhost"},
                             {"mlflow.source.type", "LOCAL"},
                             {"torchhost.run_id", state.torchhost_run_id}};
  if (!settings.section.parent_run_id.empty()) tags.push_back({"mlflow.parentRunId", settings.section.parent_run_id});
  for (auto& tag : user_tags(settings.section.tags)) tags.push_back(std::move(tag));
  return tags;
}

}  // namespace

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t count_complete_lines(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  int64_t lines = 0;
  char buffer[1 << 16];
  while (in) {
    in.read(buffer, sizeof buffer);
    const std::streamsize got = in.gcount();
    for (std::streamsize i = 0; i < got; ++i) lines += buffer[i] == '\n';
  }
  return lines;
}

RunSettings settings_from(const RunConfig& config, const std::filesystem::path& run_dir) {
  const MlflowSection& section = config.logging.mlflow;
  if (!section.run_name.empty()) return {section, section.run_name};
  if (!section.parent_run_id.empty()) return {section, run_dir.filename().string()};
  return {section, config.run.name};
}

RunSync::RunSync(std::filesystem::path run_dir, RunSettings settings, State state, HttpClient& http)
    : run_dir_(std::move(run_dir)), settings_(std::move(settings)), state_(std::move(state)), http_(http), api_(http) {}

void RunSync::ensure_run() {
  if (!state_.run_id.empty()) return;
  if (state_.experiment_id.empty()) {
    state_.experiment_id = api_.experiment_id(settings_.section.experiment);
    save();
  }
  const RunInfo run = api_.create_run(state_.experiment_id, settings_.run_name, now_ms(), run_tags(settings_, state_));
  state_.run_id = run.run_id;
  state_.artifact_uri = run.artifact_uri;
  save();
}

void RunSync::reopen() {
  ensure_run();
  api_.update_run(state_.run_id, "RUNNING", 0);
}

void RunSync::send_params() {
  if (state_.params_sent) return;
  const toml::table config = parse_toml_file(run_dir_ / "config.toml");
  for (const auto& body : log_batch_bodies(state_.run_id, {}, params_from_config(config).entries, runtime_tags(run_dir_)))
    api_.log_batch(body);
  state_.params_sent = true;
  save();
}

std::vector<std::string> RunSync::history_lines_from(int64_t first) {
  std::vector<std::string> lines;
  std::ifstream in(run_dir_ / "history.jsonl", std::ios::binary);
  if (!in) return lines;
  // Read on from where the last call stopped, unless lines from before it are wanted again (a
  // request that failed).
  if (first < line_at_offset_) offset_ = line_at_offset_ = 0;
  in.seekg(offset_);
  std::string text;
  while (std::getline(in, text)) {
    if (in.eof()) break; // a last line without its newline: the trainer is still writing it
    if (line_at_offset_ >= first) lines.push_back(text);
    offset_ += static_cast<int64_t>(text.size()) + 1;
    ++line_at_offset_;
  }
  return lines;
}

int64_t RunSync::records_available() { return count_complete_lines(run_dir_ / "history.jsonl"); }

int64_t RunSync::send_history() {
  ensure_run();
  send_params();
  const int64_t first = state_.records_sent; // the line lines[0] is
  const std::vector<std::string> lines = history_lines_from(first);
  const int64_t now = now_ms();
  size_t next = 0;
  while (next < lines.size()) {
    // Whole records per request, up to a full batch of metrics (one record may need more).
    std::vector<Metric> metrics;
    size_t end = next;
    while (end < lines.size()) {
      // A record keeps the time it was first read at: a request sent again after a timeout that
      // the server had in fact stored then repeats identical rows, which MLflow's store keeps once.
      const int64_t timestamp = first_read_ms_.try_emplace(first + static_cast<int64_t>(end), now).first->second;
      std::vector<Metric> more;
      try {
        more = metrics_from_record(parse_history_line(lines[end]), timestamp);
      } catch (const Error&) {
        // A damaged line (the plots skip it too): nothing to send for it.
      }
      if (!metrics.empty() && metrics.size() + more.size() > kMaxMetricsPerBatch) break;
      metrics.insert(metrics.end(), more.begin(), more.end());
      ++end;
    }
    for (const auto& body : log_batch_bodies(state_.run_id, metrics, {}, {})) api_.log_batch(body);
    next = end;
    state_.records_sent = first + static_cast<int64_t>(next);
    first_read_ms_.erase(first_read_ms_.begin(), first_read_ms_.lower_bound(state_.records_sent));
    save();
  }
  return static_cast<int64_t>(lines.size());
}

void RunSync::set_end_status(const std::string& status) {
  state_.end_status = status;
  state_.artifacts_sent = false;
  state_.status_sent = false;
  save();
}

void RunSync::send_artifacts() {
  if (state_.artifacts_sent) return;
  if (state_.artifact_uri.empty()) state_.artifact_uri = api_.get_run(state_.run_id).artifact_uri;
  std::vector<std::string> files{"config.toml", "runtime.toml", "history.jsonl", "history.csv"};
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir_ / "plots", error))
    if (entry.path().extension() == ".png") files.push_back("plots/" + entry.path().filename().string());
  if (settings_.section.log_checkpoints == "best") files.emplace_back("checkpoints/best.pt");
  for (const auto& relative : files) {
    const std::filesystem::path file = run_dir_ / relative;
    if (!std::filesystem::is_regular_file(file, error)) continue; // not written by this run (no plots, no best yet)
    api_.upload_artifact(state_.artifact_uri, relative, file);
  }
  state_.artifacts_sent = true;
  save();
}

void RunSync::send_end() {
  send_history();
  const auto send_status = [&] {
    if (state_.status_sent || state_.end_status.empty()) return;
    api_.update_run(state_.run_id, state_.end_status, now_ms());
    state_.status_sent = true;
    save();
  };
  // A stopped run (KILLED) ends within a few seconds (a scheduler's SIGKILL follows): its status
  // goes before the artifacts, which may be a checkpoint too large for the time left. A finished
  // run's goes last, so that a FINISHED run on the server has everything.
  if (state_.end_status == "KILLED") send_status();
  // Artifacts the server refuses (no artifact proxy) must not keep the status from it.
  std::optional<ApiError> artifacts_refused;
  try {
    send_artifacts();
  } catch (const ApiError& e) {
    if (e.transient()) throw;
    artifacts_refused = e;
  }
  send_status();
  if (artifacts_refused) throw *artifacts_refused;
}

std::string RunSync::run_page() const {
  if (state_.run_id.empty()) return "";
  // The ids come from the server (checked there) or from state.toml, which anyone may have edited:
  // shown printable either way (security trial F9).
  return http_.connection().tracking_uri + "/#/experiments/" + printable_excerpt(state_.experiment_id, 64) + "/runs/" +
         printable_excerpt(state_.run_id, 64);
}

}  // namespace tp::mlflow
