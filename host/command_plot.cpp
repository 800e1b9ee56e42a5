#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "tp/framework/error.h"
#include "tp/framework/report/plots.h"

namespace tp::cli {

int run_plot(const Options& options) {
  namespace fs = std::filesystem;
  const fs::path run_dir = options.run_dir;
  std::error_code ec;
  // A wrong argument is a usage error (exit 2); a damaged history is a runtime one (exit 1),
  // which draw_run_plots reports itself.
  if (!fs::is_directory(run_dir, ec))
    throw ConfigError("", "host plot: the run directory '" + run_dir.string() + "' " +
                              (fs::exists(run_dir, ec) ? "is not a directory" : "does not exist") +
                              ". Pass the directory a training run wrote (its run.output_dir).");
  if (!fs::exists(run_dir / "history.jsonl", ec))
    throw ConfigError("", "host plot: '" + run_dir.string() + "' has no history.jsonl, so it is not a training "
                          "run's directory, or the run has not logged a step yet. Pass the directory "
                          "given as run.output_dir (or --output-dir) when training.");
  const auto written = draw_run_plots(run_dir);
  if (written.empty())
    std::printf("host plot: %s has no step or epoch records yet; nothing drawn.\n",
                (run_dir / "history.jsonl").c_str());
  for (const auto& file : written) std::printf("%s\n", file.c_str());
  return kExitOk;
}

}  // namespace tp::cli
