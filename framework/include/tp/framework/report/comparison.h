// Comparing runs (`host compare`, and `host sweep` at its end): one row per run with the
// configuration values that differ between the runs, the final and best value of one metric,
// length, time, throughput, peak memory and the training step's split, written as a table
// (stdout), comparison.csv and comparison.md, plus overlay plots of loss and metric
// (docs/experiments.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tp/framework/report/run_record.h"

namespace tp {

/// One run's row. NaN (and -1 for counts) where the run does not have the value.
struct ComparisonRow {
  std::string run;                  ///< the run directory's name
  std::vector<FlatValue> config;    ///< the value of each Comparison::keys entry ("" display when unset)
  double final_metric = 0.0;        ///< the metric at its last evaluation
  double best_metric = 0.0;         ///< the best value over the run (higher_is_better)
  int64_t epochs = -1;              ///< epochs completed (the last epoch record)
  int64_t steps = -1;               ///< optimizer steps (the largest step of any record)
  int64_t ranks = -1;               ///< the run's world size (runtime.toml); -1 when unknown
  double global_batch = 0.0;        ///< samples per optimizer step: batch_size x grad_accum_steps x ranks
  bool finished = true;             ///< the run wrote report.toml (else its report columns are NaN)
  bool running = false;             ///< a training holds the run's lock now
  double wall_s = 0.0;              ///< report.toml train_seconds: training wall time, evaluation included
  double epoch_s = 0.0;             ///< mean time/epoch_s of the epoch records (training only)
  double train_samples_per_s = 0.0; ///< training samples / training seconds over the epoch records
  double train_ms_per_step = 0.0;   ///< training seconds x 1000 / the steps of the timed epochs (evaluation excluded)
  double peak_device_mb = 0.0;      ///< report.toml: peak allocated on the accelerator (NaN on CPU)
  double peak_host_mb = 0.0;        ///< report.toml: peak resident set size of the process
  double fit_ms_per_step = 0.0;     ///< report.toml ms_per_step: the last process's wall time per step, evaluation,
                                    ///< checkpoints and plots included
  double data_wait_ms = 0.0;        ///< report.toml: waiting for the loader, per step
  double forward_ms = 0.0;          ///< report.toml: the training step's split
  double backward_ms = 0.0;
  double optimizer_ms = 0.0;
};

/// The comparison of several runs.
struct Comparison {
  std::string metric;              ///< the compared metric ("val/accuracy")
  std::vector<std::string> keys;   ///< config keys whose values differ between the runs, in key order
  std::vector<ComparisonRow> rows; ///< one per run, in the order given
};

/// The metric to compare when none is asked for: the runs' checkpoint.monitor (of the runs that
/// recorded anything, when some did). Throws
/// tp::ConfigError when the runs monitor different metrics (naming them: pass --metric).
std::string default_metric(const std::vector<RunRecord>& runs);

/// Builds the comparison of `runs` (at least one) on `metric`. Keys that name where a run wrote
/// its files (run_location_keys()) are left out. `mode` is "min" or "max" (--mode: which value of
/// `metric` is best, for every run), or "" for each run's own (higher_is_better). Throws
/// tp::ConfigError naming the run and the values its history has when a finished run never
/// recorded `metric` (an unfinished one may not have evaluated yet: NaN).
Comparison compare_runs(const std::vector<RunRecord>& runs, const std::string& metric, const std::string& mode = "");

/// The table as CSV (RFC 4180 quoting; numbers in full precision, empty cells where a value is
/// missing). Header: run, the differing keys, "final <metric>", "best <metric>", epochs, steps,
/// ranks, global_batch, wall_s, epoch_s, train_samples_per_s, train_ms_per_step, fit_ms_per_step, peak_device_mb,
/// peak_host_mb, data_wait_ms, forward_ms, backward_ms, optimizer_ms, finished ("yes", "running"
/// while a training holds its lock, else "no": both leave the report's columns, wall_s to
/// optimizer_ms but the train_ ones, empty). The train_ columns are the
/// training loop alone (they agree: batch x 1000 / train_ms_per_step ~ train_samples_per_s);
/// fit_ms_per_step includes evaluation, checkpoints and plots.
std::string comparison_csv(const Comparison& comparison);

/// The same table as GitHub Markdown, numbers rounded for reading, "-" where missing.
std::string comparison_markdown(const Comparison& comparison);

/// The same table as aligned plain text for a terminal.
std::string comparison_text(const Comparison& comparison);

/// Draws comparison_loss_step.png, comparison_loss_time.png, comparison_<metric>_step.png and
/// comparison_<metric>_time.png into `out_dir` (the metric's name made file-safe, as plots.h
/// does): one line per run, labelled by its differing values, over the optimizer step and over
/// the training time (the history's time/step_s summed over steps; epoch records' time/epoch_s
/// when no step carries it). A chart without any point is not drawn. Returns the files written.
/// Throws tp::Error like draw_run_plots (no cairo driver, a file that cannot be written).
std::vector<std::filesystem::path> draw_comparison_plots(const std::vector<RunRecord>& runs,
                                                         const Comparison& comparison,
                                                         const std::filesystem::path& out_dir);

}  // namespace tp
