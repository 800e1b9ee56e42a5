// What every command needs before it can act: the logger, the host services plugins see, the
// loaded plugin registry and (for train/eval) the validated config with its run directory, and,
// when a launcher started this process as one rank of several, the joined process group.
#pragma once

#include <c10/core/Device.h>

#include <filesystem>
#include <memory>

#include "cli.h"
#include "tp/framework/config/run_config.h"
#include "tp/framework/dist/dist_context.h"
#include "tp/framework/dist/rendezvous.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/registry.h"
#include "tp/framework/util/log.h"

namespace tp::cli {

struct Session {
  /// `place` comes from the environment (read_rendezvous); it sets the logger's rank (only rank
  /// 0 prints INFO) and what plugins read through tp.dist/1.
  explicit Session(const Rendezvous& place);

  Rendezvous place;
  Logger logger;
  HostServices host;
  Registry registry{host};
  RunConfig config;              ///< valid when a config was loaded
  std::filesystem::path run_dir; ///< config.run.output_dir or --output-dir
  /// The job's process group; null for a single process (WORLD_SIZE unset or 1).
  std::unique_ptr<DistContext> dist;

  /// The device to run on: cuda:LOCAL_RANK (or cpu) under data-parallel training, else run.device.
  c10::Device device() const;
  /// `--checkpoint`'s file: "best" and "last" name run_dir/checkpoints/<name>.pt (throws
  /// CheckpointError saying how to point at a moved run when it does not exist), anything else is a path.
  std::filesystem::path checkpoint_file(const std::string& which) const;
};

/// The run's plugin_dirs with each relative one resolved against `config_file`'s directory.
std::vector<std::string> config_plugin_dirs(const RunConfig& config, const std::filesystem::path& config_file);

/// The plugin search path: --plugin-dir, the config's `config_dirs`, TORCHHOST_PLUGIN_PATH and the
/// built-in directory, highest precedence first.
std::vector<PluginDir> search_path(const Options& options, const std::vector<std::string>& config_dirs);

/// Loads the config (when `options.config` is set: file, environment mirrors, --set), then
/// every plugin on the search path, then validates the component tables against their schemas.
/// For train/eval under a launcher (WORLD_SIZE > 1) it then joins the process group, which
/// blocks until every rank has arrived. Throws ConfigError / PluginLoadError / tp::Error.
std::unique_ptr<Session> open_session(const Options& options);

}  // namespace tp::cli
