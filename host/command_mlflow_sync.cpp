#include <filesystem>

#include "commands.h"
#include "tp/framework/error.h"
#include "tp/framework/tracking/mlflow_tracker.h"
#include "tp/framework/util/log.h"

namespace tp::cli {

int run_mlflow_sync(const Options& options) {
  Logger log(0, options.verbose);
  std::error_code error;
  if (!std::filesystem::is_directory(options.run_dir, error))
    throw ConfigError("RUN_DIR", "host mlflow-sync: '" + options.run_dir + "' is not a directory. Pass the directory a "
                                 "training run wrote (its run.output_dir).");
  return sync_mlflow_run(options.run_dir, log);
}

}  // namespace tp::cli
