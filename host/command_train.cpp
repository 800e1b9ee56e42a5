#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "run_assembly.h"
#include "session.h"
#include "tp/framework/config/write.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/checkpoint/run_identity.h"
#include "tp/framework/engine/stop_signal.h"
#include "tp/framework/engine/trainer.h"
#include "tp/framework/error.h"
#include "tp/framework/monitor/history.h"
#include "tp/framework/tracking/mlflow_tracker.h"
#include "tp/framework/util/atomic_file.h"
#include "tp/framework/util/file_lock.h"
#include "tp/framework/util/first_few.h"
#include "tp/framework/util/stale_temporaries.h"
#include "tp/framework/plugin/plugin_crash.h"
#include "tp/framework/util/short_number.h"

namespace tp::cli {
namespace {

// Lines of the checkpoint's resolved config that the current config lacks, and the reverse.
void warn_config_changes(Logger& log, const std::string& before, const std::string& now) {
  auto lines = [](const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) out.push_back(line);
    std::sort(out.begin(), out.end());
    return out;
  };
  const auto a = lines(before), b = lines(now);
  std::vector<std::string> removed, added;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(removed));
  std::set_difference(b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(added));
  for (const auto& line : removed) log.warn("resume: the checkpoint's config had `" + line + "`");
  for (const auto& line : added) log.warn("resume: the config now has `" + line + "`");
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

}  // namespace

int run_train(const Options& options) {
  // First: a SIGINT/SIGTERM during start-up (the datasets' prepare, the components' creation)
  // must not kill the process halfway through writing a file; it stops at the next phase.
  install_stop_signal_handlers();
  auto session = open_session(options);
  const RunConfig& config = session->config;
  Logger& log = session->logger;
  const bool rank0 = session->place.rank == 0; // only rank 0 writes files and the summary
  // One training per run directory, held by rank 0 until it exits: two would append each step
  // twice to one history and overwrite each other's checkpoints. Taken before anything is written.
  std::optional<FileLock> run_lock;
  if (rank0) {
    // An unusable --output-dir (a file, /proc, no permission) is a configuration error naming
    // it, not an "unexpected error" from the first write into it.
    std::error_code made;
    std::filesystem::create_directories(session->run_dir, made);
    if (made || !std::filesystem::is_directory(session->run_dir))
      throw ConfigError("--output-dir", "host train: cannot use " + session->run_dir.string() + " as the run directory (" +
                                            (made ? made.message() : std::string("it is not a directory")) +
                                            "). Choose another --output-dir (or run.output_dir); nothing was written.");
    run_lock.emplace(session->run_dir / "run.lock", /*inherit=*/false);
    if (!run_lock->held())
      throw ConfigError("--output-dir", "host train: another training is running in " + session->run_dir.string() +
                                            (run_lock->holder().empty() ? "" : " (pid " + run_lock->holder() + ")") +
                                            ": it holds " + (session->run_dir / "run.lock").string() +
                                            ". Two trainings in one run directory would mix their history and "
                                            "checkpoints; nothing was written. Wait for it to end (then --resume "
                                            "auto continues it), or give this run another --output-dir.");
  }
  // A fresh run never shares a directory with an earlier run's checkpoints (run_identity.h): its
  // keep_last would evict its own newer-numbered files first and --resume auto find the other's.
  // train.fast_dev_run saves none, so it may look at any directory.
  std::filesystem::path set_aside;
  if (options.resume.empty() && !config.train.fast_dev_run) {
    const std::vector<std::string> earlier = checkpoint_names(session->run_dir);
    if (!earlier.empty() && !options.new_run) {
      throw ConfigError("--output-dir", "host train: " + (session->run_dir / "checkpoints").string() +
                                            " holds an earlier run's checkpoints (" + first_few(earlier, 4) + "). A new run there would "
                                            "mix its checkpoints with them; nothing was written. Continue that run with "
                                            "--resume auto, give this one another --output-dir, or pass --new-run to "
                                            "move the earlier run's files into " +
                                            (session->run_dir / "earlier").string() + "/<UTC time>/ first.");
    }
    if (options.new_run && rank0 && !run_files(session->run_dir).empty())
      set_aside = set_earlier_run_aside(session->run_dir);
  }
  // Before any dataset runs: a plugin crash then names the component and sample (exit 5).
  install_plugin_crash_handler((session->run_dir / "checkpoints").string().c_str(),
                               (session->run_dir / "config.toml").string().c_str());
  log.open_file(session->run_dir / "train.log");
  const std::string config_text = to_toml_text(config.resolved);
  // config.toml: a fresh run's now (the crash report's `plugins check --config` names it); a
  // resumed run's only once the run is assembled and the checkpoint restored, so a --resume that
  // fails at start-up never replaces the settings that trained with ones that never did.
  const bool resuming = !options.resume.empty();
  if (rank0) {
    for (const auto& removed : sweep_stale_temporaries(session->run_dir, /*levels=*/3))
      log.info("removed " + removed.string() + ", left by a process that no longer runs");
    if (!resuming) write_file_atomically(session->run_dir / "config.toml", config_text);
  }
  log.info("run '" + config.run.name + "' from " + config.source + " -> " + session->run_dir.string());
  if (!set_aside.empty()) log.info("--new-run: the earlier run's files are now in " + set_aside.string());
  const std::string recorded_run_id = read_run_id(session->run_dir);
  log.file_only("resolved config:\n" + config_text);

  const std::string before_training = ", before training started; nothing was trained and no checkpoint written.";
  AssembledRun run = assemble_run(*session, RunRequest{.command = "host train",
                                                       .splits = {},
                                                       .start_from = options.resume == "auto" ? "" : options.resume,
                                                       .resume_auto = options.resume == "auto",
                                                       .recorded_run_id = recorded_run_id,
                                                       .initial_weights = true,
                                                       .stopped_note = before_training});
  // A fresh start appends to the history a killed attempt may have left: not after a torn line.
  if (!run.start && rank0)
    if (const auto warning = drop_torn_last_line(session->run_dir / "history.jsonl")) log.warn(*warning);
  Trainer trainer(config, run.parts, run.device, log, session->run_dir, std::move(run.collectives));
  if (run.start) {
    warn_config_changes(log, run.start->config_toml, config_text);
    trainer.resume_from(*run.start); // takes the checkpoint's run identity, where it has one
    if (!recorded_run_id.empty() && !trainer.run_id().empty() && trainer.run_id() != recorded_run_id)
      log.warn("--resume: " + run.start_path.string() + " was saved by run " + trainer.run_id() + "; " +
               session->run_dir.string() + " held run " + recorded_run_id + " (its run.id), and now continues run " +
               trainer.run_id());
    run.start.reset(); // the weights and state are in the trainer now: the copy goes
  }
  // A fresh run's identity is new; a checkpoint from before identities continues the directory's.
  if (trainer.run_id().empty())
    trainer.set_run_id(!run.start_path.empty() && !recorded_run_id.empty() ? recorded_run_id : new_run_id());
  if (rank0 && !config.train.fast_dev_run) write_run_id(session->run_dir, trainer.run_id());
  if (rank0 && resuming) write_file_atomically(session->run_dir / "config.toml", config_text);
  trainer.record_runtime();
  stop_if_signalled("host train", "while the trainer was set up" + before_training);
  // Rank 0 tracks the run on an MLflow server (docs/experiment_tracking.md); a server that
  // refuses stops here, exit 2, before the first step.
  std::optional<MlflowTracker> mlflow;
  if (rank0 && config.logging.mlflow.enabled && !config.train.fast_dev_run)
    mlflow.emplace(config, session->run_dir, trainer.run_id(), /*resumed=*/!run.start_path.empty(), log);
  const FitSummary summary = fit_tracked(trainer, mlflow ? &*mlflow : nullptr);

  const std::string result = scalars_text(summary.last_eval);
  log.info("finished " + std::to_string(summary.epochs) + " epochs (" + std::to_string(summary.steps) + " steps) in " +
           short_number(summary.seconds, 3) + " s;" + result + (summary.stopped_early ? " (stopped early)" : "") +
           (summary.skipped_steps > 0 ? "; " + std::to_string(summary.skipped_steps) +
                                            " steps skipped for a non-finite loss" : ""));
  if (summary.stopped_early && !summary.stop_reason.empty()) log.info(summary.stop_reason);
  if (!rank0 || config.train.fast_dev_run) return kExitOk;
  const auto dir = session->run_dir.string();
  std::printf(
      "\nOutputs in %s/\n  config.toml, runtime.toml  resolved configuration, effective runtime settings\n"
      "  train.log                 log\n"
      "  history.csv, .jsonl       per-step, per-evaluation and per-epoch history\n"
      "  plots/*.png               loss, metrics, lr, step time (`host plot %s` redraws)\n"
      "  checkpoints/              last.pt (resume point), best.pt (best %s), best.tsv\n",
      dir.c_str(), dir.c_str(), config.checkpoint.monitor.c_str());
  return kExitOk;
}

}  // namespace tp::cli
