// Training plots: PNG charts of a run's history (<run dir>/history.jsonl, written by tp::History),
// drawn with PLplot (its cairo device, into memory) and encoded with libpng. The trainer redraws
// them after evaluations (at most once per plots.min_interval_s, and at the end of training);
// `host plot RUN_DIR` redraws them by hand (for a finished run, or a run copied from another machine).
//
// Rationale: the charts are files, not a dashboard, so a run directory stays self-contained and
// can be looked at over ssh or in a file browser. Each PNG is replaced atomically (temporary file
// and rename), so a viewer that reloads while training runs never reads half a file.
#pragma once

#include <filesystem>
#include <vector>

namespace tp {

/// Width of every PNG draw_run_plots writes, in pixels.
inline constexpr int kPlotWidthPx = 1000;
/// Height of every PNG draw_run_plots writes, in pixels.
inline constexpr int kPlotHeightPx = 600;

/// Reads `run_dir/history.jsonl` and (re)draws the run's charts into `run_dir/plots/` (created
/// if missing), each kPlotWidthPx x kPlotHeightPx, with a title, axis labels and a legend. The
/// x axis is always the optimizer step; epoch records are placed at the step they were written.
///   - loss.png: train/loss per step (a line), train/loss and val/loss per epoch (marked lines).
///   - one PNG per other metric, named after it with every character outside [A-Za-z0-9_.-]
///     turned into '_' ("val/accuracy" -> val_accuracy.png): per-step values as a line,
///     per-epoch values as a marked line.
///   - lr.png: the learning rate per step (per epoch when no step records carry it).
///   - time.png, only when step records carry "time/..." values (data wait, compute): one line
///     each, in seconds per step.
/// A chart is drawn only when some record carries one of its values. Null values (NaN or Inf in
/// training) are gaps in a line and missing markers. Records of a kind other than "step" or
/// "epoch", and records without a "step", are skipped. An unterminated last line is ignored: it
/// is a record the trainer is still writing.
///
/// Returns the written files in the order above; empty (and no plots/ created) for a history
/// without records. Files of metrics no longer in the history are left as they are.
///
/// Throws tp::Error when run_dir is not a directory, when history.jsonl is missing or
/// unreadable, when a line is not a flat JSON object of a string "kind" and number/null values
/// (the message names file, line and column), when PLplot's cairo device is not installed, or
/// when a PNG cannot be written (the previous PNG is then unchanged).
///
/// Thread safety: [any]. PLplot keeps the current stream and its driver table in process-global
/// variables, so drawing and writing are serialized by a lock private to torchhost's plotting
/// code: calls from several threads are safe and take turns (also on the same run_dir). Code
/// outside torchhost that used PLplot in the same process would not be covered by that lock.
/// Nothing is printed to stdout or stderr, and no X display is needed.
///
/// Cost: about 0.1 s of CPU for a 10k-step history (four charts, ~20 ms each, plus parsing
/// ~1 us per line), plus an fsync per file. Lines with more points than the plot has pixel
/// columns are reduced to each column's extremes first, so drawing stays cheap for long runs;
/// docs/plots.md has the measurements.
///
/// Example:
///   for (const auto& png : tp::draw_run_plots("runs/resnet50")) std::puts(png.c_str());
std::vector<std::filesystem::path> draw_run_plots(const std::filesystem::path& run_dir);

}  // namespace tp
