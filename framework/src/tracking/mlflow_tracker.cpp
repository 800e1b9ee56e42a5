#include "tp/framework/tracking/mlflow_tracker.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "tp/framework/checkpoint/run_identity.h"
#include "tp/framework/config/load.h"
#include "tp/framework/engine/stop_signal.h"
#include "tp/framework/error.h"
#include "tp/framework/util/file_lock.h"
#include "tp/framework/util/log.h"
#include "tp/framework/util/shell_word.h"
#include "tracking/mlflow_sync.h"

namespace tp {
namespace {

using mlflow::ApiError;

const char* status_word(MlflowEnd how) {
  switch (how) {
    case MlflowEnd::kFinished: return "FINISHED";
    case MlflowEnd::kFailed: return "FAILED";
    case MlflowEnd::kKilled: return "KILLED";
  }
  return "FAILED";
}

const char* environment(const char* name) { return std::getenv(name); }

// The connection to the configured server (`section`'s URI, else MLFLOW_TRACKING_URI; `configured`
// says where the user set it), for the run whose state `state` was read from `dir`. The
// credentials go only to that server: a state file naming another one (edited, or written under
// another configuration) is refused, never followed.
mlflow::Connection connection_for_state(const MlflowSection& section, const mlflow::State& state,
                                        const std::filesystem::path& dir, const std::string& command,
                                        const std::string& configured) {
  mlflow::Connection connection = mlflow::connection_from(section, environment);
  const std::string recorded = mlflow::server_of(state.tracking_uri);
  if (state.tracking_uri.empty() || recorded == connection.tracking_uri) return connection;
  const std::string file = mlflow::state_file(dir).string();
  throw ConfigError("logging.mlflow.tracking_uri",
                    command + ": " + file + " says this run is tracked on " + recorded + ", but the configured "
                    "server is " + connection.tracking_uri + " (" + configured + "). The credentials go only to "
                    "the configured server, so nothing was sent to either. If the run lives on " + recorded +
                    ", name that server in logging.mlflow.tracking_uri (or MLFLOW_TRACKING_URI when it is \"\"); "
                    "to track the run anew on " + connection.tracking_uri + ", delete " + file +
                    " (the next `host mlflow-sync` sends everything to a new MLflow run).");
}

// How long end() waits: finish_timeout_seconds, then the request in flight is abandoned. A run a
// stop signal ended waits kStoppedEndSeconds at most: a scheduler's SIGKILL follows its SIGTERM
// within a grace time (SLURM's KillWait, Kubernetes' terminationGracePeriodSeconds: 30 s by
// default) that the checkpoint's save has already used part of; the state file keeps what is
// left for `host mlflow-sync` or the resumed run.
constexpr double kStoppedEndSeconds = 5;

bool stopped_end_is_shorter(const MlflowSection& section, MlflowEnd how) {
  return how == MlflowEnd::kKilled && kStoppedEndSeconds < section.finish_timeout_seconds;
}

double end_wait_seconds(const MlflowSection& section, MlflowEnd how) {
  return stopped_end_is_shorter(section, how) ? kStoppedEndSeconds : section.finish_timeout_seconds;
}

std::string end_wait_text(const MlflowSection& section, MlflowEnd how) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", end_wait_seconds(section, how));
  return stopped_end_is_shorter(section, how)
             ? std::string("the end's wait after a stop signal (") + seconds + " s) ran out"
             : std::string("the end's wait (logging.mlflow.finish_timeout_seconds = ") + seconds + " s) ran out";
}

// "N of M history records, the artifacts and the status FINISHED": what the server still lacks.
std::string missing_parts(const mlflow::State& state, int64_t available) {
  std::vector<std::string> parts;
  if (state.run_id.empty()) parts.emplace_back("the run itself");
  if (!state.params_sent) parts.emplace_back("the params");
  if (state.records_sent < available)
    parts.push_back(std::to_string(available - state.records_sent) + " of " + std::to_string(available) +
                    " history records");
  if (!state.end_status.empty() && !state.artifacts_sent) parts.emplace_back("the artifacts");
  if (!state.end_status.empty() && !state.status_sent) parts.push_back("the status " + state.end_status);
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i)
    text += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return text;
}

}  // namespace

struct MlflowTracker::Impl {
  Logger& log;
  std::filesystem::path run_dir;
  mlflow::RunSettings settings;
  std::unique_ptr<mlflow::HttpClient> http;
  std::unique_ptr<mlflow::RunSync> sync;
  bool needs_reopen = false;

  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;                     ///< the thread returns at its next check
  bool woken = false;                    ///< end() asks for a pass now (cleared by the thread)
  std::optional<std::string> end_status; ///< end() was called with this status
  bool finished = false;                 ///< the thread returned (all sent, refused, or a local failure)
  std::string last_error;
  std::thread thread;

  Impl(Logger& logger, std::filesystem::path dir) : log(logger), run_dir(std::move(dir)) {}
  void send_loop();
  bool wait(std::chrono::duration<double> interval);
};

// Waits `interval` (the flush interval, or the backoff after a failure) or until end() or the
// destructor wakes it; false when it must stop.
bool MlflowTracker::Impl::wait(std::chrono::duration<double> interval) {
  std::unique_lock lock(mutex);
  wake.wait_for(lock, interval, [&] { return stop || woken; });
  woken = false;
  return !stop;
}

void MlflowTracker::Impl::send_loop() {
  double backoff = 1;
  bool outage = false;
  do {
    std::optional<std::string> ending;
    {
      std::lock_guard lock(mutex);
      ending = end_status;
    }
    try {
      if (needs_reopen) {
        sync->reopen();
        needs_reopen = false;
      }
      if (ending) {
        if (sync->state().end_status != *ending) sync->set_end_status(*ending);
        sync->send_end();
      } else {
        sync->send_history();
      }
      if (outage) log.info("mlflow: the server answers again; the history is up to date on it");
      outage = false;
      backoff = 1;
      if (ending) break;
    } catch (const ApiError& e) {
      std::lock_guard lock(mutex);
      last_error = e.what();
      if (!e.transient()) {
        log.warn(std::string(e.what()) + ". Nothing more is sent to the server during this run; training goes on, "
                 "and what is left stays in " + run_dir.string() + ": `host mlflow-sync " + shell_word(run_dir.string()) +
                 "` sends it once the cause is fixed.");
        break;
      }
      // At the end, a server that gives no answer at all (refused, unreachable, silent for
      // timeout_seconds) is not tried again until the wait runs out: a server that is down stays
      // down for longer than the wait, and end() says what it lacks and how to send it later.
      if (ending && e.status() == 0) break;
      if (!outage && !ending) // at the end, end() says what the server lacks
        log.warn(std::string(e.what()) + ". Training goes on; the history stays in " + run_dir.string() +
                 " and is sent when the server answers again (trying again with a growing wait, up to 60 s).");
      outage = true;
      backoff = std::min(backoff * 2, 60.0);
    } catch (const std::exception& e) {
      // A local failure: the state file on a full disk, an unreadable config.toml.
      std::lock_guard lock(mutex);
      last_error = e.what();
      log.warn(std::string("mlflow: ") + e.what() + ". Nothing more is sent to the server during this run; "
               "training goes on.");
      break;
    }
  } while (wait(outage ? std::chrono::duration<double>(backoff)
                       : std::chrono::duration<double>(settings.section.flush_seconds)));
  std::lock_guard lock(mutex);
  finished = true;
  wake.notify_all();
}

MlflowTracker::MlflowTracker(const RunConfig& config, std::filesystem::path run_dir, std::string torchhost_run_id,
                             bool resumed, Logger& log)
    : impl_(std::make_unique<Impl>(log, std::move(run_dir))) {
  Impl& s = *impl_;
  s.settings = mlflow::settings_from(config, s.run_dir);
  mlflow::user_tags(s.settings.section.tags); // a malformed entry is a ConfigError now, not a warning later
  s.http = std::make_unique<mlflow::HttpClient>(mlflow::connection_from(s.settings.section, environment));
  const std::string& uri = s.http->connection().tracking_uri;
  mlflow::State state = mlflow::read_state(s.run_dir);
  const bool continues =
      resumed && state.torchhost_run_id == torchhost_run_id && mlflow::server_of(state.tracking_uri) == uri;
  int64_t resent = 0; // records the server has from an attempt the resume discarded
  if (continues) {
    state.tracking_uri = uri;
    // The same MLflow run goes on. The resume has cut history.jsonl back to its checkpoint; every
    // record after that is trained again, and need not equal what the server has: a rewind to an
    // earlier checkpoint with a changed setting, or a kill -9 past the last checkpoint resumed on
    // other threads, trains other values (experiments trial F1). So they are all sent again:
    // MLflow keeps both points of a step, and its latest value (the run's metrics, the UI) is
    // the later one, this attempt's.
    const int64_t kept = mlflow::count_complete_lines(s.run_dir / "history.jsonl");
    if (state.records_sent > kept) {
      resent = state.records_sent - kept;
      state.records_sent = kept;
    }
    s.needs_reopen = !state.run_id.empty() && !state.end_status.empty();
    state.end_status.clear();
    state.artifacts_sent = state.status_sent = false;
  } else {
    // A new MLflow run. A resumed run sends its whole history; a fresh one starts after any lines
    // an earlier attempt in this directory left.
    state = mlflow::State{};
    state.torchhost_run_id = std::move(torchhost_run_id);
    state.tracking_uri = uri;
    state.records_sent = resumed ? 0 : mlflow::count_complete_lines(s.run_dir / "history.jsonl");
  }
  mlflow::write_state(s.run_dir, state);
  s.sync = std::make_unique<mlflow::RunSync>(s.run_dir, s.settings, std::move(state), *s.http);
  // A stop signal during these requests (up to timeout_seconds each against a silent server)
  // ends them: the command stops before training (host train's step 6).
  s.http->abandon_when([] { return pending_stop_signal() != 0; }, "a stop signal arrived during start-up");
  struct StartupOnly { // the sender thread waits out its own outages
    mlflow::HttpClient& http;
    ~StartupOnly() { http.abandon_when({}, {}); }
  } startup_only{*s.http};
  try {
    s.sync->ensure_run();
    if (s.needs_reopen) {
      s.sync->reopen();
      s.needs_reopen = false;
    }
    log.info("mlflow: tracking this run as " + s.sync->run_page() + (continues ? " (continued)" : ""));
    if (resent > 0)
      log.info("mlflow: the server holds " + std::to_string(resent) + " history records after the resume point, "
               "from the attempt this resume discards; they are sent again as they are trained, and MLflow shows "
               "the latest value of each step");
  } catch (const ApiError& e) {
    if (e.unexpected())
      throw ConfigError("logging.mlflow.tracking_uri",
                        std::string(e.what()) + ". Nothing was trained: check logging.mlflow.tracking_uri, or set "
                                                "logging.mlflow.enabled = false to train without tracking.");
    if (!e.transient())
      throw ConfigError("logging.mlflow", std::string(e.what()) + ". The server at " + uri +
                                              " refused, so nothing was trained: fix the credentials, the "
                                              "permission or logging.mlflow.experiment, or set "
                                              "logging.mlflow.enabled = false to train without tracking.");
    if (pending_stop_signal() == 0) // else nothing trains: the command stops next
      log.warn(std::string(e.what()) + ". Training goes on; the MLflow run is created and the history sent when "
               "the server answers (`host mlflow-sync " + shell_word(s.run_dir.string()) + "` sends it later otherwise).");
  }
  s.thread = std::thread([&s] { s.send_loop(); });
}

MlflowTracker::~MlflowTracker() {
  if (!impl_->thread.joinable()) return;
  // The request in flight is abandoned now: a run that did not end keeps its state for a resume.
  impl_->http->set_deadline(mlflow::HttpClient::Clock::now(), "the run stopped before its end");
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stop = true;
  }
  impl_->wake.notify_all();
  impl_->thread.join();
}

void MlflowTracker::end(MlflowEnd how) {
  Impl& s = *impl_;
  if (!s.thread.joinable()) return;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(end_wait_seconds(s.settings.section, how)));
  // No transfer runs past the wait, whatever the server does (drips an answer, reads an upload a
  // byte at a time): the one in flight is abandoned within about a second of the deadline.
  s.http->set_deadline(deadline, end_wait_text(s.settings.section, how));
  {
    std::unique_lock lock(s.mutex);
    s.end_status = status_word(how);
    s.woken = true;
    s.wake.notify_all();
    s.wake.wait_until(lock, deadline, [&] { return s.finished; });
    s.stop = true;
    s.wake.notify_all();
  }
  s.thread.join(); // the request in flight ends at the deadline
  // The thread is gone: the state is this thread's now. A sender that gave up never saw the end.
  if (s.sync->state().end_status.empty()) {
    try {
      s.sync->set_end_status(status_word(how));
    } catch (const std::exception& e) {
      s.log.warn(std::string("mlflow: ") + e.what());
    }
  }
  const mlflow::State& state = s.sync->state();
  const int64_t available = s.sync->records_available();
  const std::string missing = missing_parts(state, available);
  if (missing.empty()) {
    s.log.info("mlflow: " + std::to_string(available) + " history records, the artifacts and the status " +
               state.end_status + " are on the server: " + s.sync->run_page());
    return;
  }
  s.log.warn("mlflow: the server lacks " + missing + (s.last_error.empty() ? "" : " (" + s.last_error + ")") +
             ". They are kept in " + s.run_dir.string() + "; `host mlflow-sync " + shell_word(s.run_dir.string()) +
             "` sends them.");
}

int sync_mlflow_run(const std::filesystem::path& run_dir, Logger& log) {
  const std::filesystem::path config_file = run_dir / "config.toml";
  std::error_code error;
  if (!std::filesystem::is_regular_file(config_file, error))
    throw ConfigError("RUN_DIR", "host mlflow-sync: " + run_dir.string() + " holds no config.toml, so it is not a "
                                 "run directory (host train writes one first). Name the directory a training wrote.");
  FileLock lock(run_dir / "run.lock", /*inherit=*/false);
  if (!lock.held())
    throw ConfigError("RUN_DIR", "host mlflow-sync: a training is running in " + run_dir.string() +
                                     (lock.holder().empty() ? "" : " (pid " + lock.holder() + ")") +
                                     " and sends its own history. Run the sync after it ended.");
  const RunConfig config = load_run_config(config_file, {}, {});
  const mlflow::RunSettings settings = mlflow::settings_from(config, run_dir);
  mlflow::State state = mlflow::read_state(run_dir);
  mlflow::HttpClient http(connection_for_state(settings.section, state, run_dir, "host mlflow-sync",
                                               "logging.mlflow.tracking_uri in " + config_file.string() +
                                                   ", else MLFLOW_TRACKING_URI"));
  if (!state.tracking_uri.empty()) state.tracking_uri = http.connection().tracking_uri;
  const int64_t available = mlflow::count_complete_lines(run_dir / "history.jsonl");
  if (state.records_sent > available)
    throw ConfigError("records_sent",
                      "host mlflow-sync: " + mlflow::state_file(run_dir).string() + " says the server has the first " +
                          std::to_string(state.records_sent) + " records of " + (run_dir / "history.jsonl").string() +
                          ", which holds " + std::to_string(available) + ": the state file was edited or damaged, or "
                          "the history was cut since (a --resume from an earlier checkpoint writes its records "
                          "again). Nothing was sent. If the training is to go on, `host train --resume auto` sends "
                          "the rest as it trains; otherwise set records_sent to the number of records the MLflow run "
                          "holds, or delete the state file to send the whole run to a new MLflow run.");
  if (state.torchhost_run_id.empty()) {
    // Never tracked: the whole run goes to a new MLflow run, ended FINISHED if it wrote its report.
    state.torchhost_run_id = read_run_id(run_dir);
    state.tracking_uri = http.connection().tracking_uri;
    if (std::filesystem::is_regular_file(run_dir / "report.toml", error)) state.end_status = "FINISHED";
  }
  mlflow::RunSync sync(run_dir, settings, state, http);
  // A server that does not answer (or just restarted) gets five tries over about 15 s; a refusal, one.
  for (int attempt = 1;; ++attempt) {
    try {
      if (sync.state().end_status.empty()) {
        sync.send_history();
        log.info("mlflow-sync: the run has no recorded end (it was killed, or stopped before it): its status stays "
                 "RUNNING, and `host train --resume auto` continues it");
      } else {
        sync.send_end();
      }
      break;
    } catch (const ApiError& e) {
      if (e.transient() && attempt < 5) {
        log.warn(std::string(e.what()) + "; trying again in " + std::to_string(1 << (attempt - 1)) + " s");
        std::this_thread::sleep_for(std::chrono::seconds(1 << (attempt - 1)));
        continue;
      }
      log.error(std::string(e.what()) + "; the server still lacks " +
                missing_parts(sync.state(), sync.records_available()) + ". Run the sync again once it answers.");
      return kExitRuntime;
    }
  }
  log.info("mlflow-sync: the server has the whole run: " + sync.run_page());
  return kExitOk;
}

namespace {

mlflow::RunSettings parent_settings(const RunConfig& config, const std::string& name) {
  mlflow::RunSettings settings = mlflow::settings_from(config, {});
  settings.run_name = name;
  settings.section.parent_run_id.clear();
  return settings;
}

}  // namespace

std::string start_mlflow_parent_run(const RunConfig& config, const std::filesystem::path& sweep_dir,
                                    const std::string& name, Logger& log) {
  const mlflow::RunSettings settings = parent_settings(config, name);
  mlflow::HttpClient http(mlflow::connection_from(settings.section, environment));
  mlflow::State state = mlflow::read_state(sweep_dir);
  // A state naming another server is not followed: a new parent run on the configured one.
  if (mlflow::server_of(state.tracking_uri) != http.connection().tracking_uri || state.torchhost_run_id != "sweep") {
    state = mlflow::State{};
    state.torchhost_run_id = "sweep";
    state.tracking_uri = http.connection().tracking_uri;
  }
  const bool reopen = !state.run_id.empty() && !state.end_status.empty();
  state.end_status.clear();
  state.status_sent = false;
  mlflow::RunSync sync(sweep_dir, settings, state, http);
  try {
    if (reopen) sync.reopen();
    else sync.ensure_run();
  } catch (const ApiError& e) {
    if (e.unexpected())
      throw ConfigError("logging.mlflow.tracking_uri",
                        std::string(e.what()) + ". No cell was trained: check logging.mlflow.tracking_uri, or set "
                                                "logging.mlflow.enabled = false.");
    if (!e.transient())
      throw ConfigError("logging.mlflow", std::string(e.what()) + ". The server at " + http.connection().tracking_uri +
                                              " refused the sweep's parent run, so no cell was trained: fix the "
                                              "credentials, the permission or logging.mlflow.experiment, or set "
                                              "logging.mlflow.enabled = false.");
    log.warn(std::string(e.what()) + ". The sweep goes on; its cells are tracked without a parent run.");
    return "";
  }
  log.info("mlflow: the sweep's parent run is " + sync.run_page());
  return sync.state().run_id;
}

void end_mlflow_parent_run(const RunConfig& config, const std::filesystem::path& sweep_dir, MlflowEnd how, Logger& log) {
  try {
    const mlflow::State state = mlflow::read_state(sweep_dir);
    if (state.run_id.empty()) return;
    const mlflow::RunSettings settings = parent_settings(config, "");
    mlflow::HttpClient http(connection_for_state(settings.section, state, sweep_dir, "host sweep",
                                                 "logging.mlflow.tracking_uri of the sweep's configuration, else "
                                                 "MLFLOW_TRACKING_URI"));
    mlflow::RunSync sync(sweep_dir, settings, state, http);
    sync.set_end_status(status_word(how));
    mlflow::Api(http).update_run(state.run_id, status_word(how), mlflow::now_ms());
  } catch (const std::exception& e) {
    log.warn(std::string("mlflow: the sweep's parent run keeps its status: ") + e.what());
  }
}

void log_eval_to_mlflow(const MlflowSection& section, const std::filesystem::path& run_dir, const std::string& prefix,
                        const std::vector<std::pair<std::string, double>>& metrics, int64_t step, Logger& log) {
  const mlflow::State state = mlflow::read_state(run_dir);
  if (state.run_id.empty())
    throw ConfigError("--mlflow", "host eval --mlflow: " + run_dir.string() + " is not tracked in an MLflow run (no "
                                  "run in " + mlflow::state_file(run_dir).string() + "). Train it with "
                                  "logging.mlflow.enabled = true, or send it with `host mlflow-sync " +
                                  run_dir.string() + "` first; " + "the evaluation itself was written.");
  mlflow::HttpClient http(connection_for_state(section, state, run_dir, "host eval --mlflow",
                                               "logging.mlflow.tracking_uri of host eval's configuration, else "
                                               "MLFLOW_TRACKING_URI"));
  std::vector<mlflow::Metric> sent;
  sent.reserve(metrics.size());
  const int64_t now = mlflow::now_ms();
  for (const auto& [name, value] : metrics) sent.push_back({mlflow::mlflow_key(prefix + "/" + name), value, step, now});
  try {
    for (const auto& body : mlflow::log_batch_bodies(state.run_id, sent, {}, {})) mlflow::Api(http).log_batch(body);
  } catch (const ApiError& e) {
    throw Error(std::string(e.what()) + "; the evaluation itself was written. Run `host eval --mlflow` again once "
                "the server answers.");
  }
  log.info("mlflow: " + std::to_string(sent.size()) + " metrics logged as " + prefix + "/... at step " +
           std::to_string(step) + " to " + http.connection().tracking_uri + "/#/experiments/" +
           mlflow::printable_excerpt(state.experiment_id, 64) + "/runs/" + mlflow::printable_excerpt(state.run_id, 64));
}

}  // namespace tp
