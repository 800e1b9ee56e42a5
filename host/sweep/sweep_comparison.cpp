#include "sweep/sweep_comparison.h"

#include <algorithm>
#include <cstdio>

#include "commands.h"
#include "tp/framework/error.h"

namespace tp::cli {
namespace {

namespace fs = std::filesystem;

bool holds_run(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(dir / "history.jsonl", ec) && fs::exists(dir / "config.toml", ec);
}

}  // namespace

std::vector<fs::path> earlier_finished_cells(const SweepRecord& record, const std::vector<std::string>& this_grid,
                                             const fs::path& sweep_dir) {
  std::vector<fs::path> dirs;
  for (const CellRecord& cell : record.cells()) {
    const bool in_this_grid = std::find(this_grid.begin(), this_grid.end(), cell.name) != this_grid.end();
    if (cell.status == "done" && !in_this_grid && holds_run(sweep_dir / cell.name)) dirs.push_back(sweep_dir / cell.name);
  }
  return dirs;
}

int compare_sweep_cells(const Options& options, const fs::path& sweep_dir, const std::vector<fs::path>& cells,
                        const std::vector<fs::path>& earlier) {
  Options compare = options;
  compare.run_dirs.clear();
  compare.output_dir = sweep_dir.string();
  // A cell refused before it wrote config.toml is not a run host compare reads: the other cells
  // are still compared (experiment trial F6).
  for (const fs::path& dir : cells)
    if (holds_run(dir)) compare.run_dirs.push_back(dir.string());
  if (earlier.empty()) return run_compare(compare);
  Options all = compare;
  for (const fs::path& dir : earlier) all.run_dirs.push_back(dir.string());
  std::fprintf(stderr, "host sweep: the comparison also holds the %zu finished cell(s) of earlier grids in this "
               "directory (sweep.toml)\n", earlier.size());
  try {
    return run_compare(all);
  } catch (const ConfigError& e) {
    if (compare.run_dirs.empty()) throw;
    std::fprintf(stderr, "host sweep: the earlier grids' cells cannot be compared with this grid's (%s); comparing "
                 "this grid's %zu cell(s) alone\n", e.what(), compare.run_dirs.size());
    return run_compare(compare);
  }
}

}  // namespace tp::cli
