#include "session.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "tp/framework/checkpoint/checkpoint_seal.h"
#include "tp/framework/config/load.h"
#include "tp/framework/config/lr_base.h"
#include "tp/framework/config/overrides.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/engine/runtime_setup.h" // resolve_device

namespace tp::cli {

Session::Session(const Rendezvous& where)
    : place(where),
      logger(where.rank),
      host(logger, ProcessPlace{where.rank, where.world_size, where.local_rank, where.local_world_size}) {}

namespace {

// The run directory's config.toml is read back by `host eval --config RUN/config.toml` and by
// the crash message's `host plugins check --config RUN/config.toml`, from any working directory.
// So the resolved table records what this process used, not what the file said: the run
// directory (--output-dir wins) and the plugin directories (--plugin-dir first, then the file's,
// in search order), all absolute. TORCHHOST_PLUGIN_PATH and the built-in directory are left out:
// they belong to the environment that reads the file again.
void record_paths_used(RunConfig& config, const std::filesystem::path& run_dir, const std::vector<std::string>& cli_dirs,
                       const std::vector<std::string>& config_dirs) {
  auto absolute = [](const std::filesystem::path& path) { return std::filesystem::absolute(path).lexically_normal(); };
  config.run.output_dir = absolute(run_dir).string();
  toml::array dirs;
  std::vector<std::filesystem::path> seen;
  for (const auto* list : {&cli_dirs, &config_dirs})
    for (const std::string& dir : *list) {
      const std::filesystem::path path = absolute(dir);
      if (std::find(seen.begin(), seen.end(), path) != seen.end()) continue;
      seen.push_back(path);
      dirs.push_back(path.string());
    }
  toml::table& resolved = config.resolved;
  if (!resolved.contains("run")) resolved.insert_or_assign("run", toml::table{});
  resolved.get_as<toml::table>("run")->insert_or_assign("output_dir", config.run.output_dir);
  if (!resolved.contains("plugins")) resolved.insert_or_assign("plugins", toml::table{});
  resolved.get_as<toml::table>("plugins")->insert_or_assign("dirs", std::move(dirs));
}

}  // namespace

c10::Device Session::device() const { return dist ? dist->device() : resolve_device(config.run.device); }

std::filesystem::path Session::checkpoint_file(const std::string& which) const {
  if (which != "best" && which != "last") return which;
  const std::filesystem::path file = run_dir / "checkpoints" / (which + ".pt");
  std::error_code ignored;
  // A run that keeps no best checkpoint by its settings is not a moved run (migration trial F6).
  const bool last_exists = std::filesystem::exists(run_dir / "checkpoints" / "last.pt", ignored);
  std::string kept_none;
  if (config.checkpoint.save_top_k == 0) kept_none = "checkpoint.save_top_k = 0";
  else if (config.eval.strategy == IntervalStrategy::kNo) kept_none = "eval.strategy = \"no\"";
  if (which == "best" && !kept_none.empty() && !std::filesystem::exists(file, ignored))
    throw CheckpointError("--checkpoint best: the run in " + run_dir.string() + " keeps no best checkpoint (its " +
                          kept_none + ": nothing ranks the checkpoints). " +
                          (last_exists ? std::string("Give --checkpoint last, its final weights (") +
                                             (run_dir / "checkpoints" / "last.pt").string() + "), or a checkpoint file."
                                       : std::string("Give --checkpoint with a checkpoint file of it.")));
  if (!std::filesystem::exists(file, ignored))
    throw CheckpointError("--checkpoint " + which + ": " + file.string() + " does not exist. The run directory " +
                          run_dir.string() + " is the config's run.output_dir (a run's config.toml records where the "
                          "run was trained) or --output-dir; for a run moved or copied since, give --output-dir with "
                          "its new place, or --checkpoint with the file's path.");
  return file;
}

std::vector<std::string> config_plugin_dirs(const RunConfig& config, const std::filesystem::path& config_file) {
  std::vector<std::string> dirs = config.plugin_dirs;
  // Relative plugin dirs in a config file are relative to that file, not to the shell.
  for (auto& dir : dirs)
    if (std::filesystem::path(dir).is_relative()) dir = (config_file.parent_path() / dir).lexically_normal().string();
  return dirs;
}

std::vector<PluginDir> search_path(const Options& options, const std::vector<std::string>& config_dirs) {
  const char* env_path = std::getenv("TORCHHOST_PLUGIN_PATH");
  return plugin_search_path(options.plugin_dirs, config_dirs, env_path != nullptr ? env_path : "", builtin_plugin_dir());
}

namespace {

// `--config RUN/config.toml` of a run moved or copied elsewhere still records the place it was
// trained in: eval and predict would read (and write into) that one. Said once, on rank 0.
void warn_if_run_moved(Session& session, const Options& options) {
  if ((options.command != "eval" && options.command != "predict") || !options.output_dir.empty() ||
      session.place.rank != 0)
    return;
  const std::filesystem::path config_file(options.config);
  if (config_file.filename() != "config.toml") return;
  std::error_code beside_error, recorded_error, listing_error;
  const std::filesystem::path beside =
      std::filesystem::weakly_canonical(std::filesystem::absolute(config_file).parent_path(), beside_error);
  const std::filesystem::path recorded = std::filesystem::weakly_canonical(session.run_dir, recorded_error);
  if (beside_error || recorded_error || beside == recorded ||
      !std::filesystem::is_directory(beside / "checkpoints", listing_error))
    return;
  session.logger.warn("the run's config " + config_file.string() + " lies in " + beside.string() +
                      ", but records run.output_dir = " + session.run_dir.string() + ": host " + options.command +
                      " reads that run directory. For the run beside the config (moved or copied), add --output-dir " +
                      beside.string() + ".");
}

}  // namespace

std::unique_ptr<Session> open_session(const Options& options) {
  const auto env = process_environment();
  auto session = std::make_unique<Session>(read_rendezvous(env));
  std::vector<std::string> config_dirs;
  if (!options.config.empty()) {
    // `host shards write` reads the data tables alone: a config need not name a model or loss.
    const ConfigScope scope = options.command == "shards" ? ConfigScope::kData : ConfigScope::kRun;
    session->config = load_run_config(options.config, options.sets, env, scope);
    // optim.lr_base (timm's --lr-base) scales to the global batch, which needs the ranks.
    if (const auto line = apply_lr_base(session->config.optim, session->config.train, session->place.world_size))
      session->logger.info(*line);
    // A mistyped mirror (TP_TRAIN_BATCHSIZE) is ignored: say so once, on one rank, by name only.
    if (session->place.rank == 0)
      for (const std::string& warning : unknown_environment_variables(env)) session->logger.warn(warning);
    config_dirs = config_plugin_dirs(session->config, options.config);
    session->run_dir = options.output_dir.empty() ? session->config.run.output_dir : options.output_dir;
    warn_if_run_moved(*session, options);
    record_paths_used(session->config, session->run_dir, options.plugin_dirs, config_dirs);
  }
  session->registry.allow_insecure_plugin_dirs(options.allow_insecure_plugin_dir);
  // The listing is where a user finds the file that stops runs: it shows it instead of stopping.
  session->registry.list_unusable_files(options.command == "plugins" && options.action == "list");
  session->registry.load_search_path(search_path(options, config_dirs));
  if (!options.config.empty()) resolve_components(session->config, session->registry);
  if (!options.config.empty() && session->place.distributed()) {
    const RunConfig& config = session->config;
    session->dist = DistContext::join(session->place, config.dist, config.run.device);
    session->host.attach_process_group(*session->dist); // plugins' tp.dist/2 collectives
    session->logger.info("rank " + std::to_string(session->place.rank) + " of " +
                         std::to_string(session->place.world_size) + " joined (" + session->place.source + ", " +
                         session->dist->backend() + ", " + session->dist->device().str() + ")");
  }
  return session;
}

}  // namespace tp::cli
