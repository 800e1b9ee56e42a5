// The chart of the learning-rate range test (`host tune lr`, docs/tune.md): the smoothed training
// loss over the swept learning rate on a log axis, the suggested lr marked. Drawn with the run
// plots' renderer (PLplot, plots.h), so it looks like the run's other charts.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tp {

/// Draws `file` (a PNG of kPlotWidthPx x kPlotHeightPx, replaced atomically): `smoothed_loss[i]`
/// over `lrs[i]` (same length, lrs > 0) as a line on a log10 lr axis, and, when `suggestion` is
/// an index into them, that point as a red marker whose legend entry is `suggestion_label`.
/// Non-finite losses are gaps. Throws tp::Error like draw_run_plots (no cairo driver, a file that
/// cannot be written; the previous file is then unchanged) and for series of different lengths.
/// Thread safety: [any] (PLplot is serialized as for draw_run_plots). Cost: ~20 ms.
/// Example:
///   tp::draw_lr_find_plot(run_dir / "lr_find.png", lrs, smoothed, 57, "suggested lr 3.2e-03");
void draw_lr_find_plot(const std::filesystem::path& file, const std::vector<double>& lrs,
                       const std::vector<double>& smoothed_loss, std::optional<std::size_t> suggestion,
                       const std::string& suggestion_label);

}  // namespace tp
