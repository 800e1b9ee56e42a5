// One line chart as data, and its rendering to PNG bytes with PLplot. Keeping the chart a plain
// struct means the choice of what to plot (plots.cpp) never touches PLplot, and PLplot and its
// process-global state stay inside chart.cpp.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

class plstream;  // PLplot's C++ stream (plstream.h), kept out of this header with its macros

namespace tp::detail {

/// Series colours: matplotlib's "tab10" (which people tell apart without a legend lookup),
/// then lighter tints of the first two for noisy per-step lines under their per-epoch means.
enum class Colour {
  kBlue, kOrange, kGreen, kRed, kPurple, kBrown, kPink, kOlive, kCyan, kGrey,
  kLightBlue, kLightOrange
};

/// One curve. `x` and `y` have the same length; a NaN `y` is a gap (no marker, line broken).
struct Series {
  std::string label;   ///< legend text
  std::vector<double> x;
  std::vector<double> y;
  bool markers = false; ///< true: a line through round markers (per-epoch values)
  Colour colour = Colour::kBlue;
};

/// A titled line chart; series are drawn in order, later ones on top. Text is shown as given
/// (PLplot's '#' escapes are neutralised).
struct Chart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
  bool x_counts = true; ///< x is a count (optimizer steps): ticks only at whole numbers; false for seconds
  /// x is drawn on a log10 axis (learning rates): ticks at whole decades, labelled 1e-05 ... 10,
  /// with the 2..9 minor ticks between; x values must be > 0 (others are gaps).
  bool x_log = false;
};

/// Exclusive use of PLplot for drawing a batch of charts.
/// PLplot keeps its current stream, stream table and driver table in process-global variables,
/// so a ChartRenderer holds a process-wide lock for its whole life: renderers in other threads
/// wait in the constructor. It also keeps one idle stream open, so PLplot does not unload and
/// reload its driver between the charts of a batch.
/// Thread safety: [any]; one renderer per thread at a time (a second one in the same thread
/// would wait for itself).
class ChartRenderer {
 public:
  /// Takes the lock, then checks that PLplot's "memcairo" device is installed (without it,
  /// PLplot would prompt on stdin and exit). Every chart is `width_px` x `height_px` (> 0).
  /// Throws tp::Error naming the missing package.
  ChartRenderer(int width_px, int height_px);
  ~ChartRenderer();
  ChartRenderer(const ChartRenderer&) = delete;
  ChartRenderer& operator=(const ChartRenderer&) = delete;

  /// Renders `chart` as a PNG and returns the file's bytes. The x axis covers every point, the
  /// y axis every finite value below 1e100 in magnitude (larger ones are drawn clipped at the
  /// edge; a chart without any gets [0, 1]). Lines with more points than the plot has pixel
  /// columns are first reduced to each column's extremes (chart_layout.h: decimate), which draws
  /// the same picture at a fraction of the cost. Prints nothing; needs no display.
  /// Throws tp::Error when PLplot reports an error.
  std::string render_png(const Chart& chart);

 private:
  std::unique_lock<std::mutex> lock_;
  std::unique_ptr<plstream> idle_stream_;
  int width_px_;
  int height_px_;
};

}  // namespace tp::detail
