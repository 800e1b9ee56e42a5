#include "run_assembly.h"

#include "start_agreement.h"

#include "tp/framework/checkpoint/checkpoint_manager.h"
#include "tp/framework/checkpoint/initial_weights.h"
#include "tp/framework/engine/runtime_setup.h"
#include "tp/framework/engine/stop_signal.h"

namespace tp::cli {
namespace {

// The start checkpoint of `request`, with the file it came from; nothing for a fresh start or
// when --resume auto finds no checkpoint.
std::optional<CheckpointManager::ResumePoint> find_start(Session& session, const RunRequest& request) {
  if (!request.resume_auto) {
    if (request.start_from.empty()) return std::nullopt;
    return CheckpointManager::ResumePoint{request.start_from, load_checkpoint(request.start_from)};
  }
  // The newest save that loads: last.pt, else step-N.pt / best files, past damaged ones and
  // other runs' (run_identity.h).
  Logger& log = session.logger;
  const auto dir = session.run_dir / "checkpoints";
  auto point = CheckpointManager::find_resume_point(dir, [&](const std::string& line) { log.warn(line); },
                                                    request.recorded_run_id);
  if (!point) log.info("--resume auto: no checkpoint in " + dir.string() + "; starting fresh");
  if (point && point->skipped > 0)
    log.warn("--resume auto: resuming from " + point->path.string() + ", the newest checkpoint that loads (" +
             std::to_string(point->skipped) + " damaged name(s) passed over); the steps after it are trained again");
  if (point && point->other_runs > 0)
    log.warn("--resume auto: resuming from " + point->path.string() + ", the newest checkpoint of this run (" +
             std::to_string(point->other_runs) + " name(s) of another run passed over)");
  return point;
}

// train.init_weights into the model on a fresh start, with a line that says what kept its own
// init (train.init_weights_ignore), so that a mistyped glob shows at once.
void load_initial_weights_into(const RunConfig& config, const RunComponents& parts, Logger& log) {
  const InitialWeightsReport report =
      load_initial_weights(config.train.init_weights, parts.model->state(), config.train.init_weights_ignore,
                           config.train.init_weights_prefix);
  std::string line =
      "initial weights from " + config.train.init_weights + ": " + std::to_string(report.loaded) + " tensors loaded";
  if (!config.train.init_weights_prefix.empty())
    line += " from under \"" + config.train.init_weights_prefix + "\" (" + std::to_string(report.outside_prefix) +
            " other names of the file unread)";
  if (!report.kept_model.empty()) {
    line += "; the model's own init kept for " + std::to_string(report.kept_model.size()) + " (";
    for (size_t i = 0; i < report.kept_model.size(); ++i) line += (i ? ", " : "") + report.kept_model[i];
    line += ")";
  }
  if (!report.ignored_file.empty())
    line += "; " + std::to_string(report.ignored_file.size()) + " entries of the file left out";
  log.info(line);
}

}  // namespace

AssembledRun assemble_run(Session& session, const RunRequest& request) {
  // A request's own val table is read from a copy: no command writes into the session's configuration.
  std::optional<RunConfig> with_val_table;
  if (request.val_table) {
    with_val_table = session.config;
    with_val_table->data.val = *request.val_table;
  }
  const RunConfig& config = with_val_table ? *with_val_table : session.config;
  Logger& log = session.logger;
  // A start checkpoint one rank cannot read (an explicit --resume path on a node-local disk) ends
  // every rank at once with its reason: the others would wait in the datasets' preparation for
  // dist.prepare_timeout_s, then blame the preparation (the review of cluster trial F4's fix).
  std::optional<CheckpointManager::ResumePoint> start;
  run_agreed(session.dist.get(), "agree on the start checkpoint", [&] { start = find_start(session, request); });
  const c10::Device device = session.device();
  apply_process_settings(config, device, session.place.local_world_size).report(log);
  const auto stop_point = [&](const std::string& when) {
    if (!request.stopped_note.empty()) stop_if_signalled(request.command, when + request.stopped_note);
  };
  for (const std::string& line :
       prepare_datasets(config, session.registry, request.splits, session.place.local_rank, session.dist.get(),
                        [&](const std::string& line) { log.every_rank(line); }))
    log.info(line);
  stop_point("while the datasets were prepared");
  AssembledRun run{device, create_components(config, session.registry, request.splits), {}, std::nullopt,
                   make_collectives(session.dist.get(), device)};
  stop_point("while the components were created");
  if (const auto note = surplus_outputs_note(config, run.parts)) log.warn(*note);
  if (start) {
    run.start_path = start->path;
    run.start.emplace(std::move(start->checkpoint));
  }
  // Before the model moves to the device and the optimizer is built over it.
  if (request.initial_weights && !config.train.init_weights.empty()) {
    if (run.start)
      log.info("train.init_weights ignored: resuming from " + run.start_path.string());
    else
      load_initial_weights_into(config, run.parts, log);
  }
  return run;
}

}  // namespace tp::cli
