// `host compare RUN_DIR... [--metric NAME] [--mode min|max] [--output-dir DIR]`: the runs side by side
// (docs/experiments.md). Reads only the run directories; loads no plugin and no LibTorch state.
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "tp/framework/error.h"
#include "tp/framework/report/comparison.h"
#include "tp/framework/report/seed_groups.h"
#include "tp/framework/util/atomic_file.h"

namespace tp::cli {

int run_compare(const Options& options) {
  namespace fs = std::filesystem;
  // Every directory is read before anything is written: a missing one is reported at once, naming
  // it, and leaves no half-written comparison behind. An unfinished run (interrupted, failed,
  // still running) is compared as far as it got: a sweep's failed cell or a live run beside the
  // finished ones.
  std::vector<RunRecord> runs;
  for (const std::string& dir : options.run_dirs) {
    runs.push_back(read_run(dir));
    if (!runs.back().finished)
      std::fprintf(stderr, "host compare: '%s' %s; its row shows its history so far (finished = %s) and leaves the "
                   "report's columns (wall_s, fit_ms_per_step, peak memory, the step's split) empty.\n", dir.c_str(),
                   runs.back().running ? "is training now (a process holds its run.lock)"
                                       : "has not finished (no report.toml: it was interrupted or it failed)",
                   runs.back().running ? "running" : "no");
  }
  name_runs_apart(runs); // two sweeps' same cell: rows and legends that tell them apart
  const std::string metric = options.metric.empty() ? default_metric(runs) : options.metric;
  const Comparison comparison = compare_runs(runs, metric, options.mode);

  const fs::path out_dir = options.output_dir.empty() ? fs::path(".") : fs::path(options.output_dir);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw ConfigError("--output-dir", "host compare: cannot create the output directory " + out_dir.string() +
                                                ": " + ec.message() + ". Pass a writable --output-dir.");
  write_file_atomically(out_dir / "comparison.csv", comparison_csv(comparison));
  write_file_atomically(out_dir / "comparison.md", comparison_markdown(comparison));
  std::printf("%s\n", comparison_text(comparison).c_str());
  std::printf("%s\n%s\n", (out_dir / "comparison.csv").c_str(), (out_dir / "comparison.md").c_str());
  // Runs that differ in run.seed among others: each setting's mean and spread over its seeds.
  const SeedGroups groups = group_over_seeds(comparison);
  if (!groups.groups.empty()) {
    write_file_atomically(out_dir / "comparison_seeds.csv", seed_groups_csv(groups));
    write_file_atomically(out_dir / "comparison_seeds.md", seed_groups_markdown(groups));
    std::printf("\nover seeds (run.seed), per setting:\n%s%s\n%s\n", seed_groups_markdown(groups).c_str(),
                (out_dir / "comparison_seeds.csv").c_str(), (out_dir / "comparison_seeds.md").c_str());
  }
  // The table is the result; charts are a view of it, so a missing cairo driver only warns.
  try {
    for (const auto& file : draw_comparison_plots(runs, comparison, out_dir)) std::printf("%s\n", file.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "host compare: the comparison plots were not drawn: %s\n", e.what());
  }
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace tp::cli
