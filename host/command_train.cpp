// `host train` (docs/commands.md): a run from its config, fresh or resumed, in the numbered steps
// of run_train; the run directory and the run's identity are TrainingRunDirectory's.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "run_assembly.h"
#include "session.h"
#include "start_agreement.h"
#include "training_run_directory.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/engine/stop_signal.h"
#include "tp/framework/engine/scalars.h"
#include "tp/framework/config/config_changes.h"
#include "tp/framework/engine/trainer.h"
#include "tp/framework/error.h"
#include "tp/framework/tracking/mlflow_tracker.h"
#include "tp/framework/util/short_number.h"

namespace tp::cli {
namespace {

// The resolved config's changes since the checkpoint's, one warning per key: a resume may change
// settings (a longer schedule, another batch size), and the log says which it did.
void warn_config_changes(Logger& log, const std::string& before, const std::string& now) {
  for (const std::string& change : config_changes(before, now)) log.warn("resume: " + change);
}

// Settings the checkpoint's optimizer and schedule state would override are refused, before
// config.toml records them: a resumed run that said lr 0.01 trained on at 0.003 (exp trial F4).
void refuse_ignored_changes(const std::string& before, const std::string& now, const std::filesystem::path& start) {
  const std::vector<std::string> ignored = changes_a_resume_ignores(before, now);
  if (ignored.empty()) return;
  std::string list;
  for (const std::string& line : ignored) list += (list.empty() ? "" : "; ") + line;
  throw ConfigError(ignored.front().substr(0, ignored.front().find(':')),
                    "--resume: " + list + " since " + start.string() +
                        ". A resumed run continues the checkpoint's optimizer and schedule, whose state holds these "
                        "settings: the run would record the new values and train with the old ones. Resume with the "
                        "values the checkpoint was made with, or train on from its weights with the new ones as a "
                        "new run: --output-dir NEW --set train.init_weights=\"" + start.string() +
                        "\" (a fresh optimizer and schedule).");
}

// The run's MLflow status follows how fit() ended: FINISHED, KILLED for a stop signal (the run
// saved and may be resumed), FAILED for any other error, which then propagates as before.
FitSummary fit_tracked(Trainer& trainer, MlflowTracker* mlflow) {
  if (mlflow == nullptr) return trainer.fit();
  FitSummary summary;
  try {
    summary = trainer.fit();
  } catch (const Interrupted&) {
    mlflow->end(MlflowEnd::kKilled);
    throw;
  } catch (...) {
    mlflow->end(MlflowEnd::kFailed);
    throw;
  }
  mlflow->end(MlflowEnd::kFinished);
  return summary;
}


// The log's closing lines: epochs, steps, time, the last evaluation and why it stopped early.
void report_finished(Logger& log, const FitSummary& summary) {
  const std::string result = scalars_text(summary.last_eval);
  log.info("finished " + std::to_string(summary.epochs) + " epochs (" + std::to_string(summary.steps) + " steps) in " +
           short_number(summary.seconds, 3) + " s;" + result + (summary.stopped_early ? " (stopped early)" : "") +
           (summary.skipped_steps > 0 ? "; " + std::to_string(summary.skipped_steps) +
                                            " steps skipped for a non-finite loss" : ""));
  if (summary.stopped_early && !summary.stop_reason.empty()) log.info(summary.stop_reason);
}

// What the run directory now holds, for the user at the terminal: only what this run wrote (a
// trial's run without evaluation or plots was told of best.pt and plots/*.png).
void print_outputs(const std::filesystem::path& run_dir, const std::string& monitor) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto has = [&](const fs::path& relative) { return fs::exists(run_dir / relative, ec); };
  bool plots = false;
  for (const auto& entry : fs::directory_iterator(run_dir / "plots", ec))
    plots = plots || entry.path().extension() == ".png";
  std::string checkpoints;
  for (const auto& [file, what] : {std::pair<std::string, std::string>{"last.pt", "last.pt (resume point)"},
                                   {"best.pt", "best.pt (best " + monitor + ")"}, {"best.tsv", "best.tsv"}})
    if (has(fs::path("checkpoints") / file)) checkpoints += (checkpoints.empty() ? "" : ", ") + what;
  const std::string dir = run_dir.string();
  std::printf("\nOutputs in %s/\n  config.toml, runtime.toml  resolved configuration, effective runtime settings\n"
              "  train.log                 log\n", dir.c_str());
  if (has("history.jsonl")) std::printf("  history.csv, .jsonl       per-step, per-evaluation and per-epoch history\n");
  if (plots) std::printf("  plots/*.png               loss, metrics, lr, step time (`host plot %s` redraws)\n", dir.c_str());
  if (!checkpoints.empty()) std::printf("  checkpoints/              %s\n", checkpoints.c_str());
  if (has("report.toml")) std::printf("  report.toml               training report: totals, step split, throughput (host compare)\n");
  if (has("run.id")) std::printf("  run.id                    the run's identity (docs/run_directory.md)\n");
  if (has("trace/rank0.json")) std::printf("  trace/rank0.json          run.trace_steps' profiler trace (Perfetto, chrome://tracing)\n");
}

// How this rank starts, as every rank must: fresh, or at one checkpoint's position of one run.
std::string start_text(const AssembledRun& run) {
  if (!run.start) return "starts fresh";
  const LoadedCheckpoint& c = *run.start;
  return "resumes at step " + std::to_string(c.step) + " (epoch " + std::to_string(c.epoch) + ", batch " +
         std::to_string(c.batch) + ")" + (c.run_id.empty() ? "" : " of run " + c.run_id);
}

// Every rank starts alike, before the trainer's first collective: a resuming rank enters the
// checkpoint's broadcasts, a fresh one does not, and with the run directory on node-local disks
// they hung for dist.timeout_s and failed in different collectives (cluster trial F4).
void agree_on_start(Session& session, const AssembledRun& run) {
  const std::string own = start_text(run);
  agree_with_rank0(session.dist.get(), "agree on the start", "start", own, [&](const std::string& rank0) {
    namespace fs = std::filesystem;
    const std::string where = run.start ? " from " + fs::absolute(run.start_path).string()
                                        : " (no checkpoint in " + fs::absolute(session.run_dir / "checkpoints").string() + ")";
    throw ConfigError("", "the start differs from rank 0's: this rank " + own + where + ", rank 0 " + rank0 +
                              ". The ranks did not load the same checkpoint: with --resume every rank must see the "
                              "same run directory (a shared file system on several nodes), and the world size must be "
                              "the one the checkpoint was written with.");
  });
}

// Steps 3-8 of run_train, in the claimed run directory.
int train_in(Session& session, const TrainingRunDirectory& run_dir, const Options& options) {
  const RunConfig& config = session.config;
  Logger& log = session.logger;
  const bool rank0 = session.place.rank == 0; // only rank 0 writes files and the summary
  // 3. The run assembled: start checkpoint, process settings, datasets, components.
  const std::string before_training = ", before training started; nothing was trained and no checkpoint written.";
  AssembledRun run = assemble_run(session, RunRequest{.command = "host train",
                                                       // Without evaluations nothing reads a val split: a
                                                       // dataset with none to give is not refused for it.
                                                       .splits = {.val = config.eval.strategy != IntervalStrategy::kNo},
                                                       .start_from = options.resume == "auto" ? "" : options.resume,
                                                       .resume_auto = options.resume == "auto",
                                                       .recorded_run_id = run_dir.recorded_run_id(),
                                                       .initial_weights = true,
                                                       .stopped_note = before_training});
  agree_on_start(session, run);
  if (run.start) refuse_ignored_changes(run.start->config_toml, run_dir.config_text(), run.start_path);
  run_dir.prepare_history(run.start.has_value());
  // 4. The trainer, with the start checkpoint's state (and its run identity, where it has one).
  Trainer trainer(config, run.parts, run.device, log, session.run_dir, std::move(run.collectives));
  if (run.start) {
    warn_config_changes(log, run.start->config_toml, run_dir.config_text());
    trainer.resume_from(*run.start);
    run.start.reset(); // the weights and state are in the trainer now: the copy goes
  }
  // 5-6. Rank 0's own work before the first step, agreed on by every rank before they meet in
  //      training's collectives (a refusal there names its reason on every rank).
  std::optional<MlflowTracker> mlflow;
  const auto record_and_track = [&] {
    // 5. The run's identity, recorded; runtime.toml from now on.
    // A finished run resumed (a requeued job) trains nothing: its config.toml and runtime.toml keep
    // describing what trained, whatever this command's settings (experiment trial F16).
    const bool finished = !run.start_path.empty() && trainer.finished();
    trainer.set_run_id(run_dir.settle_identity(trainer.run_id(), run.start_path, /*will_train=*/!finished));
    if (finished)
      log.info("--resume: the run had finished; nothing to train, and its config.toml, runtime.toml and "
               "report.toml stay as the run that trained wrote them");
    else
      trainer.record_runtime();
    stop_if_signalled("host train", "while the trainer was set up" + before_training);
    // 6. Rank 0 tracks the run on an MLflow server (docs/experiment_tracking.md); a server that
    //    refuses stops here, exit 2, before the first step.
    if (rank0 && config.logging.mlflow.enabled && !config.train.fast_dev_run)
      mlflow.emplace(config, session.run_dir, trainer.run_id(), /*resumed=*/!run.start_path.empty(), log);
    // A signal during the server's start-up requests (which it cuts short) stops before the first step.
    stop_if_signalled("host train", "while the MLflow run was set up" + before_training);
  };
  try {
    run_agreed(session.dist.get(), "agree on the run's record and tracking", record_and_track);
  } catch (const Interrupted&) {
    // The MLflow run rank 0 created ends as fit_tracked would end it: another rank's refusal (or a
    // signal) after its creation must not leave it RUNNING on the server (review of 50fc8dc).
    if (mlflow) mlflow->end(MlflowEnd::kKilled);
    throw;
  } catch (...) {
    if (mlflow) mlflow->end(MlflowEnd::kFailed);
    throw;
  }
  // 7. Training.
  const FitSummary summary = fit_tracked(trainer, mlflow ? &*mlflow : nullptr);
  // 8. The summary: the log's line on every rank, the outputs on rank 0.
  report_finished(log, summary);
  if (rank0 && !config.train.fast_dev_run) print_outputs(session.run_dir, config.checkpoint.monitor);
  return kExitOk;
}

}  // namespace

int run_train(const Options& options) {
  // 1. Signals first: a stop signal (kStopSignals) during start-up (the datasets' prepare, the components'
  //    creation) must not kill the process halfway through writing a file; it stops at the next phase.
  install_stop_signal_handlers();
  auto session = open_session(options);
  // Every rank runs rank 0's configuration, checked before anything depends on it (cluster trial F2).
  agree_on_config(session->dist.get(), session->config);
  // 2. The run directory claimed for this training: lock, refusals, --new-run, config.toml,
  //    train.log (rank 0), agreed on by every rank.
  std::optional<TrainingRunDirectory> run_dir;
  run_agreed(session->dist.get(), "agree on the run directory's claim", [&] { run_dir.emplace(*session, options); });
  try {
    return train_in(*session, *run_dir, options);
  } catch (const Interrupted& e) {
    // Why the run ended and where it saved reach train.log too (stderr gets it from main): read
    // later, a log that just stops looks like a crash.
    session->logger.file_error("stop", e.what());
    throw;
  } catch (const std::exception& e) {
    // The error reaches train.log too (rank 0's; stderr gets it from main, labelled alike): a run
    // left alone under nohup or a scheduler keeps why it ended beside its history.
    const char* label = dynamic_cast<const ConfigError*>(&e) != nullptr       ? "configuration error"
                        : dynamic_cast<const PluginLoadError*>(&e) != nullptr ? "plugin error"
                                                                               : "error";
    session->logger.file_error(label, e.what());
    throw;
  }
}

}  // namespace tp::cli
