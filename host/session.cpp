#include "session.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "tp/framework/config/load.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/engine/runtime_setup.h"

namespace tp::cli {

Session::Session(const Rendezvous& where)
    : place(where),
      logger(where.rank),
      host(logger, ProcessPlace{where.rank, where.world_size, where.local_rank, where.local_world_size}) {}

c10::Device Session::device() const { return dist ? dist->device() : resolve_device(config.run.device); }

std::unique_ptr<Session> open_session(const Options& options) {
  const auto env = process_environment();
  auto session = std::make_unique<Session>(read_rendezvous(env));
  std::vector<std::string> config_dirs;
  if (!options.config.empty()) {
    session->config = load_run_config(options.config, options.sets, env);
    config_dirs = session->config.plugin_dirs;
    // Relative plugin dirs in a config file are relative to that file, not to the shell.
    for (auto& dir : config_dirs)
      if (std::filesystem::path(dir).is_relative())
        dir = (std::filesystem::path(options.config).parent_path() / dir).lexically_normal().string();
    session->run_dir = options.output_dir.empty() ? session->config.run.output_dir : options.output_dir;
  }
  const char* env_path = std::getenv("TORCHHOST_PLUGIN_PATH");
  session->registry.allow_insecure_plugin_dirs(options.allow_insecure_plugin_dir);
  session->registry.load_search_path(
      plugin_search_path(options.plugin_dirs, config_dirs, env_path != nullptr ? env_path : "", builtin_plugin_dir()));
  if (!options.config.empty()) resolve_components(session->config, session->registry);
  if (!options.config.empty() && session->place.distributed()) {
    RunConfig& config = session->config;
    // run.threads = 0 shares this node's cores among its ranks; N ranks each taking all cores
    // oversubscribe them (ARCH-17: measured 5x slower).
    if (config.run.threads == 0) {
      const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      const int share = cores / std::max(1, session->place.local_world_size) - static_cast<int>(config.data.num_workers);
      config.run.threads = std::max(1, share);
    }
    session->dist = DistContext::join(session->place, config.dist, config.run.device);
    session->logger.info("rank " + std::to_string(session->place.rank) + " of " +
                         std::to_string(session->place.world_size) + " joined (" + session->place.source + ", " +
                         session->dist->backend() + ", " + session->dist->device().str() + ")");
  }
  return session;
}

}  // namespace tp::cli
