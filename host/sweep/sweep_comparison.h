// The comparison a sweep writes into its directory at the end (`host compare` of its cells,
// docs/experiments.md): this grid's cells that trained, then the finished cells of earlier grids
// in the same directory, so the sweep's comparison.csv is of the directory and not of the last
// command typed (experiments trial F3).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "cli.h"
#include "sweep/sweep_record.h"

namespace tp::cli {

/// The cells of `record` whose status is "done", in the order recorded, that are not named in
/// `this_grid` and whose directory under `sweep_dir` holds a run (config.toml and history.jsonl).
std::vector<std::filesystem::path> earlier_finished_cells(const SweepRecord& record,
                                                          const std::vector<std::string>& this_grid,
                                                          const std::filesystem::path& sweep_dir);

/// `host compare` (with `options`' --metric and --mode) of the directories of `cells` that hold a
/// run (a cell refused before it wrote its config.toml is left out), then `earlier`, written into
/// `sweep_dir`. When the two sets cannot be compared together (earlier cells monitoring another
/// metric, and no --metric), it says so and compares `cells` alone. Returns run_compare's exit
/// code. Throws as run_compare does.
int compare_sweep_cells(const Options& options, const std::filesystem::path& sweep_dir,
                        const std::vector<std::filesystem::path>& cells,
                        const std::vector<std::filesystem::path>& earlier);

}  // namespace tp::cli
