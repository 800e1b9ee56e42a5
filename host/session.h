// What every command needs before it can act: the logger, the host services plugins see, the
// loaded plugin registry and (for train/eval) the validated config with its run directory.
#pragma once

#include <filesystem>
#include <memory>

#include "cli.h"
#include "tp/framework/config/run_config.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/registry.h"
#include "tp/framework/util/log.h"

namespace tp::cli {

struct Session {
  Logger logger;
  HostServices host{logger, ProcessPlace{}};
  Registry registry{host};
  RunConfig config;              ///< valid when a config was loaded
  std::filesystem::path run_dir; ///< config.run.output_dir or --output-dir
};

/// Loads the config (when `options.config` is set: file, environment mirrors, --set), then
/// every plugin on the search path, then validates the component tables against their schemas.
/// Throws ConfigError / PluginLoadError.
std::unique_ptr<Session> open_session(const Options& options);

}  // namespace tp::cli
