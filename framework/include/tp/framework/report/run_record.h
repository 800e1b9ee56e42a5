// A run directory read back for comparison (`host compare`, `host sweep`): its resolved
// configuration (config.toml), its history (history.jsonl), its runtime settings (runtime.toml:
// the world size) and its training report (report.toml, which the trainer writes when training
// ends; an unfinished run has none).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "tp/framework/config/flatten.h"
#include "tp/framework/monitor/history.h"

namespace tp {

/// One run directory's files, parsed.
struct RunRecord {
  std::filesystem::path dir;
  std::string name;                   ///< the directory's own name ("amp.precision=bf16")
  FlatConfig config;                  ///< config.toml, flattened
  std::vector<HistoryRecord> history; ///< history.jsonl, in file order
  toml::table report;                 ///< report.toml; empty when the run has not finished
  bool finished = true;               ///< report.toml exists: the training ended
  bool running = false;               ///< a training holds its run.lock now (unfinished, live)
  int64_t world_size = -1;            ///< runtime.toml's ranks; -1 when it has none
};

/// Gives runs whose directory names coincide (the same cell of two sweeps, `runs/base` of two
/// projects) names that tell them apart: as many trailing path components as make them differ
/// ("sweep_a/optim.lr=1e-3", "sweep_b/optim.lr=1e-3"), and " (2)", " (3)" for a directory given
/// more than once. Names that are already unique stay as they are.
void name_runs_apart(std::vector<RunRecord>& runs);

/// Reads `dir`. Throws tp::ConfigError (exit 2) naming the directory and what is missing when it
/// is not a directory or lacks config.toml or history.jsonl; tp::Error (exit 1) naming file and
/// line when a file does not parse. A run without report.toml (interrupted, failed or still
/// running) is read with `finished` false and an empty report.
RunRecord read_run(const std::filesystem::path& dir);

/// The value of `name` at each record of `run` that carries it, as (optimizer step, value); a
/// value recorded as null (non-finite in training) is NaN. Evaluated values come from "epoch" and "eval" records; only when
/// those have none (a training value logged per step alone) from "step" records. `per_step` (when
/// not null) says which kind was used.
std::vector<std::pair<double, double>> metric_points(const RunRecord& run, const std::string& name,
                                                     bool* per_step = nullptr);

/// Whether a higher `metric` is better for `run`: the run's checkpoint.mode when the metric is its
/// checkpoint.monitor, else early_stopping.mode when it is that monitor, else by its name as
/// mode = "auto" decides (config/monitor_mode.h; true for a name that says neither).
bool higher_is_better(const RunRecord& run, const std::string& metric);

/// report.toml's number `key`, or NaN when the report lacks it.
double report_number(const RunRecord& run, const std::string& key);

}  // namespace tp
