#include "session.h"

#include <cstdlib>

#include "tp/framework/config/load.h"
#include "tp/framework/engine/run_components.h"

namespace tp::cli {

std::unique_ptr<Session> open_session(const Options& options) {
  auto session = std::make_unique<Session>();
  std::vector<std::string> config_dirs;
  if (!options.config.empty()) {
    session->config = load_run_config(options.config, options.sets, process_environment());
    config_dirs = session->config.plugin_dirs;
    // Relative plugin dirs in a config file are relative to that file, not to the shell.
    for (auto& dir : config_dirs)
      if (std::filesystem::path(dir).is_relative())
        dir = (std::filesystem::path(options.config).parent_path() / dir).lexically_normal().string();
    session->run_dir = options.output_dir.empty() ? session->config.run.output_dir : options.output_dir;
  }
  const char* env_path = std::getenv("TORCHHOST_PLUGIN_PATH");
  session->registry.load_search_path(
      plugin_search_path(options.plugin_dirs, config_dirs, env_path != nullptr ? env_path : "", builtin_plugin_dir()));
  if (!options.config.empty()) resolve_components(session->config, session->registry);
  return session;
}

}  // namespace tp::cli
