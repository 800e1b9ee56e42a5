#include "chart.h"

#include <plstream.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "chart_layout.h"
#include "png_encode.h"
#include "tp/framework/error.h"

namespace tp::detail {
namespace {

/* Colours (PLplot colour map 0 indices) */

constexpr PLINT kBackground = 0;
constexpr PLINT kInk = 1;  // frame, tick labels, titles, legend text
constexpr PLINT kGrid = 2;
constexpr PLINT kLegendBg = 3;
constexpr PLINT kFirstSeries = 4;  // then one index per Colour, in its order
constexpr std::array<std::array<PLINT, 3>, 12> kPalette{{{31, 119, 180}, {255, 127, 14}, {44, 160, 44},
                                                         {214, 39, 40}, {148, 103, 189}, {140, 86, 75},
                                                         {227, 119, 194}, {188, 189, 34}, {23, 190, 207},
                                                         {127, 127, 127}, {158, 202, 225}, {253, 208, 162}}};
constexpr PLINT colour_index(Colour c) { return kFirstSeries + static_cast<PLINT>(c); }

/* Layout */

// The device renders into our buffer (memcairo), and png_encode.cpp encodes it: about half the
// time of PLplot's own PNG device, whose encoder favours size over speed.
constexpr const char* kDevice = "memcairo";
constexpr const char* kMarker = "\xE2\x97\x8F";  // U+25CF BLACK CIRCLE, drawn in the series colour
// Text size relative to PLplot's default, which is large for a 1000-pixel-wide chart.
constexpr PLFLT kTextScale = 0.85;
// Viewport edges in normalized page coordinates: room for tick labels and the x title at the
// bottom, the chart title on top. The left edge depends on the y labels' width.
constexpr PLFLT kRight = 0.965, kBottom = 0.11, kTop = 0.92;
// Values beyond this magnitude are not used for the axis ranges.
constexpr double kLargest = 1e100;
// Beyond this many points a marker per point is a smear; the line alone reads better.
constexpr std::size_t kMaxMarkers = 200;

/* PLplot access */

// PLplot keeps the current stream, the stream table and the driver table in process-global
// variables (every plstream method starts by selecting its stream), so two threads drawing at
// once would corrupt each other. This lock is the one piece of process-wide state we add, and
// it only guards PLplot's own.
std::mutex& plplot_mutex() {
  static std::mutex mutex;
  return mutex;
}

// plinit() with a device PLplot does not know prompts on stdin for another one and, failing
// that, calls exit(). Ask for the device list first so a missing driver package is an error.
void require_device() {
  constexpr std::size_t kCapacity = 128;
  std::array<const char*, kCapacity + 1> menus{}, names{};
  const char** menu_list = menus.data();
  const char** name_list = names.data();
  int count = static_cast<int>(kCapacity);
  plgDevs(&menu_list, &name_list, &count);
  for (std::size_t i = 0; i < static_cast<std::size_t>(std::max(count, 0)); ++i)
    if (names[i] != nullptr && std::string_view(names[i]) == kDevice) return;
  throw Error(std::string("cannot draw plots: PLplot's \"") + kDevice + "\" device is not installed. Install the "
              "Debian package plplot-driver-cairo (scripts/setup lists it), or set plots.enabled = false.");
}

// '#' starts a PLplot text escape ("#u" is superscript); "##" is a literal '#'.
std::string plain_text(const std::string& text) {
  std::string out;
  for (const char c : text) out += c == '#' ? std::string("##") : std::string(1, c);
  return out;
}

/* Layout in PLplot's terms */

struct AxisTicks {
  Ticks x;
  Ticks y;
  bool x_log = false; ///< x holds log10 values: a tick at k is labelled 10^k
};

// PLplot's custom label hook (box option "o"), so tick labels are layout's plain numbers.
void tick_label(PLINT axis, PLFLT value, char* label, PLINT length, PLPointer data) {
  const auto* ticks = static_cast<const AxisTicks*>(data);
  if (axis == PL_X_AXIS && ticks->x_log) {  // "1e-05", "0.001", "1", "10": the lr as one types it
    std::snprintf(label, static_cast<std::size_t>(length), "%g", std::pow(10.0, std::round(value)));
    return;
  }
  const std::string text = tick_text(axis == PL_X_AXIS ? ticks->x : ticks->y, value);
  std::snprintf(label, static_cast<std::size_t>(length), "%s", text.c_str());
}

constexpr PLINT position_of(Corner corner) {
  switch (corner) {
    case Corner::kTopRight: return PL_POSITION_TOP | PL_POSITION_RIGHT;
    case Corner::kBottomRight: return PL_POSITION_BOTTOM | PL_POSITION_RIGHT;
    case Corner::kTopLeft: return PL_POSITION_TOP | PL_POSITION_LEFT;
    case Corner::kBottomLeft: return PL_POSITION_BOTTOM | PL_POSITION_LEFT;
  }
  return PL_POSITION_TOP | PL_POSITION_RIGHT;
}

bool shows_markers(const Series& s) {
  return s.markers && std::count_if(s.y.begin(), s.y.end(), [](double v) { return std::isfinite(v); }) <=
                          static_cast<std::ptrdiff_t>(kMaxMarkers);
}

/* Drawing (under the lock) */

void draw_series(plstream& pls, const Series& s) {
  pls.col0(colour_index(s.colour));
  pls.width(s.markers ? 2.0 : 1.2);
  // Lines break at NaN; a run of a single point has no line, so it gets a marker to stay visible.
  std::vector<double> mx, my;
  std::size_t i = 0;
  while (i < s.y.size()) {
    while (i < s.y.size() && !std::isfinite(s.y[i])) ++i;
    std::size_t end = i;
    while (end < s.y.size() && std::isfinite(s.y[end])) ++end;
    if (end - i >= 2) pls.line(static_cast<PLINT>(end - i), s.x.data() + i, s.y.data() + i);
    if (end - i == 1 && !s.markers) pls.string(1, s.x.data() + i, s.y.data() + i, kMarker);
    i = end;
  }
  if (!shows_markers(s)) return;
  for (std::size_t k = 0; k < s.y.size(); ++k)
    if (std::isfinite(s.y[k])) {
      mx.push_back(s.x[k]);
      my.push_back(s.y[k]);
    }
  if (!mx.empty()) pls.string(static_cast<PLINT>(mx.size()), mx.data(), my.data(), kMarker);
}

void draw_legend(plstream& pls, const std::vector<Series>& series, PLINT corner) {
  const std::size_t n = series.size();
  std::vector<PLINT> options(n), colours(n), text_colours(n, kInk), styles(n, 1), symbol_numbers(n, 1);
  std::vector<PLFLT> widths(n), symbol_scales(n, 0.9);
  std::vector<std::string> labels(n);
  std::vector<const char*> texts(n), symbols(n, kMarker);
  for (std::size_t i = 0; i < n; ++i) {
    labels[i] = plain_text(series[i].label);
    texts[i] = labels[i].c_str();
    options[i] = PL_LEGEND_LINE | (shows_markers(series[i]) ? PL_LEGEND_SYMBOL : 0);
    colours[i] = colour_index(series[i].colour);
    widths[i] = series[i].markers ? 2.0 : 1.2;
  }
  PLFLT width = 0, height = 0;
  pls.legend(&width, &height, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX, corner | PL_POSITION_INSIDE,
             /*x=*/0.015, /*y=*/0.025, /*plot_width=*/0.05, kLegendBg, kGrid, /*bb_style=*/1, /*nrow=*/0,
             /*ncolumn=*/0, static_cast<PLINT>(n), options.data(), /*text_offset=*/0.8, /*text_scale=*/0.75,
             /*text_spacing=*/2.0, /*text_justification=*/0.0, text_colours.data(), texts.data(), nullptr, nullptr,
             nullptr, nullptr, colours.data(), styles.data(), widths.data(), colours.data(), symbol_scales.data(),
             symbol_numbers.data(), symbols.data());
}

}  // namespace

ChartRenderer::ChartRenderer(int width_px, int height_px)
    : lock_(plplot_mutex()), width_px_(width_px), height_px_(height_px) {
  TP_CHECK(width_px > 0 && height_px > 0, "ChartRenderer: bad size ", width_px, "x", height_px);
  require_device();
  // PLplot's C++ binding counts live streams and, when the last one ends, tears the library down
  // (drivers unloaded, driver table freed). This stream is never initialised; it only keeps the
  // count above zero until the batch is done.
  idle_stream_ = std::make_unique<plstream>();
}

ChartRenderer::~ChartRenderer() { idle_stream_.reset(); }  // before the lock is released

std::string ChartRenderer::render_png(const Chart& chart) {
  // Absurd values (a diverged loss at 1e300) would overflow the axis arithmetic: they stay out
  // of the ranges, and are drawn clamped just beyond the edge, where PLplot clips them.
  auto plottable = [](double v) { return std::isfinite(v) && std::abs(v) < kLargest; };
  // A log axis is drawn in log10 units; PLplot's "l" box option only places the minor ticks.
  std::vector<Series> given = chart.series;
  if (chart.x_log)
    for (Series& s : given)
      for (double& x : s.x) x = x > 0 ? std::log10(x) : std::nan("");
  // The x axis spans every record of the chart's values, null ones included, so charts of one
  // run line up; the y axis spans the values.
  Range x_range, y_range;
  for (const Series& s : given)
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!plottable(s.x[i])) continue;
      x_range.add(s.x[i]);
      if (plottable(s.y[i])) y_range.add(s.y[i]);
    }
  x_range.finish(0.01);
  y_range.finish(0.05);
  auto clamp_into = [](std::vector<double>& values, const Range& range) {
    const double span = range.hi - range.lo;
    for (double& v : values)
      if (std::isfinite(v)) v = std::clamp(v, range.lo - span, range.hi + span);
  };
  std::vector<Series> series;
  for (Series s : given) {
    clamp_into(s.x, x_range);
    clamp_into(s.y, y_range);
    series.push_back(decimate(s, x_range, width_px_));
  }

  const PLINT legend_corner = position_of(place_legend(series, x_range, y_range));
  AxisTicks ticks{choose_ticks(x_range.lo, x_range.hi, 8, 1e9), choose_ticks(y_range.lo, y_range.hi, 6, 1e6),
                  chart.x_log};
  if (chart.x_counts || chart.x_log) {
    ticks.x.step = std::max(ticks.x.step, 1.0);  // the x axis counts optimizer steps: no step 1.5
    ticks.x.decimals = ticks.x.scientific ? ticks.x.decimals : 0;
  }
  // The y title goes just left of the widest tick label, measured in character heights (a digit
  // or sign of the cairo font is at most 0.9 of one wide), and the left margin makes room for both.
  std::size_t widest = 0;
  for (const double v : {y_range.lo, y_range.hi, y_range.lo + ticks.y.step})
    widest = std::max(widest, tick_text(ticks.y, v).size());
  const double y_title_offset = 1.2 + 0.9 * static_cast<double>(widest);

  std::vector<unsigned char> rgb(static_cast<std::size_t>(width_px_) * static_cast<std::size_t>(height_px_) * 3, 255);
  PLINT error = 0;
  std::array<char, 4096> message{};  // PLplot writes its errors here instead of to stderr
  {
    plstream pls;  // its destructor (plend1) ends the page, which copies the image into `rgb`
    pls.sError(&error, message.data());
    pls.sdev(kDevice);
    pls.smem(width_px_, height_px_, rgb.data());
    pls.scmap0n(kFirstSeries + static_cast<PLINT>(kPalette.size()));
    pls.scol0(kBackground, 255, 255, 255);
    pls.scol0(kInk, 40, 40, 40);
    pls.scol0(kGrid, 210, 210, 210);
    pls.scol0a(kLegendBg, 255, 255, 255, 0.85);
    for (std::size_t i = 0; i < kPalette.size(); ++i)
      pls.scol0(kFirstSeries + static_cast<PLINT>(i), kPalette[i][0], kPalette[i][1], kPalette[i][2]);
    pls.init();
    if (error == 0) {
      pls.adv(0);
      pls.schr(0, kTextScale);
      PLFLT default_mm = 0, height_mm = 0, page_x0 = 0, page_x1 = 0, page_y0 = 0, page_y1 = 0;
      pls.gchr(default_mm, height_mm);
      pls.gspa(page_x0, page_x1, page_y0, page_y1);
      const PLFLT left = (y_title_offset + 0.6) * height_mm / (page_x1 - page_x0);
      pls.vpor(left, kRight, kBottom, kTop);
      pls.wind(x_range.lo, x_range.hi, y_range.lo, y_range.hi);
      pls.slabelfunc(&tick_label, &ticks);
      pls.col0(kGrid);
      pls.width(1.0);
      pls.box(chart.x_log ? "gl" : "g", ticks.x.step, 0, "g", ticks.y.step, 0);
      pls.col0(kInk);
      pls.box(chart.x_log ? "bcnstlo" : "bcnsto", ticks.x.step, 0, "bcnstvo", ticks.y.step, 0);
      pls.schr(0, kTextScale * 1.15);
      pls.mtex("t", 1.4, 0.5, 0.5, plain_text(chart.title).c_str());
      pls.schr(0, kTextScale);
      pls.mtex("b", 3.0, 0.5, 0.5, plain_text(chart.x_label).c_str());
      pls.mtex("l", y_title_offset, 0.5, 0.5, plain_text(chart.y_label).c_str());
      for (const Series& s : series) draw_series(pls, s);
      if (!series.empty()) draw_legend(pls, series, legend_corner);
    }
  }
  if (error != 0)
    throw Error("cannot draw the plot \"" + chart.title + "\": PLplot reported: " + std::string(message.data()) + ".");
  return encode_png_rgb(rgb, width_px_, height_px_);
}

}  // namespace tp::detail
