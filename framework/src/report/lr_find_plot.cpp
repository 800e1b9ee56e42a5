#include "tp/framework/report/lr_find_plot.h"

#include "chart.h"
#include "tp/framework/error.h"
#include "tp/framework/report/plots.h"
#include "tp/framework/util/atomic_file.h"

namespace tp {

void draw_lr_find_plot(const std::filesystem::path& file, const std::vector<double>& lrs,
                       const std::vector<double>& smoothed_loss, std::optional<std::size_t> suggestion,
                       const std::string& suggestion_label) {
  TP_CHECK(lrs.size() == smoothed_loss.size(), "draw_lr_find_plot: ", lrs.size(), " lrs but ", smoothed_loss.size(),
           " losses.");
  using detail::Colour;
  using detail::Series;
  detail::Chart chart{"Learning-rate range test", "learning rate (log scale)", "training loss (smoothed)", {}};
  chart.x_counts = false;
  chart.x_log = true;
  chart.series.push_back(Series{"smoothed loss", lrs, smoothed_loss, false, Colour::kBlue});
  if (suggestion && *suggestion < lrs.size())
    chart.series.push_back(
        Series{suggestion_label, {lrs[*suggestion]}, {smoothed_loss[*suggestion]}, true, Colour::kRed});
  detail::ChartRenderer renderer(kPlotWidthPx, kPlotHeightPx);
  const std::string png = renderer.render_png(chart);
  write_file_atomically(file, png.data(), png.size());
}

}  // namespace tp
