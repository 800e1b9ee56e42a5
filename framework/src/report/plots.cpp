#include "tp/framework/report/plots.h"

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "chart.h"
#include "file_stem.h"
#include "history_reader.h"
#include "tp/framework/error.h"
#include "tp/framework/util/atomic_file.h"
#include "tp/framework/util/own_directory.h"

namespace tp {
namespace {

using detail::Chart;
using detail::Colour;
using detail::file_stem;
using detail::Series;

constexpr const char* kStepAxis = "optimizer step";

// One value name's points, split by record kind; x is the record's optimizer step. `eval` holds
// the evaluations no epoch record carries (eval.strategy = "steps", SWA's final one).
struct Points {
  Series step;
  Series epoch;
  Series eval;
};

// Every value name of the history (except "step" and "epoch"), in first-seen order.
struct Columns {
  std::vector<std::string> names;
  std::map<std::string, Points, std::less<>> points;

  const Points* find(std::string_view name) const {
    const auto it = points.find(name);
    return it == points.end() ? nullptr : &it->second;
  }
};

Columns collect(const std::vector<HistoryRecord>& records) {
  Columns columns;
  for (const HistoryRecord& record : records) {
    const bool per_step = record.kind == "step", per_eval = record.kind == "eval";
    if (!per_step && !per_eval && record.kind != "epoch") continue;  // a kind this version does not plot
    double step = std::nan("");
    for (const auto& [name, value] : record.values)
      if (name == "step") step = value;
    if (!std::isfinite(step)) continue;  // cannot be placed on the x axis
    for (const auto& [name, value] : record.values) {
      if (name == "step" || name == "epoch") continue;
      auto [it, added] = columns.points.try_emplace(name);
      if (added) columns.names.push_back(name);
      Series& series = per_step ? it->second.step : per_eval ? it->second.eval : it->second.epoch;
      series.x.push_back(step);
      series.y.push_back(value);
    }
  }
  return columns;
}

// Adds `name`'s per-step line and per-epoch and per-evaluation marked lines, whichever the history has. Per-step
// values are noisy, so they take the light tint and the epoch line goes on top in full colour.
void add_series(Chart& chart, const Columns& columns, const std::string& name, bool validation) {
  const Points* points = columns.find(name);
  if (points == nullptr) return;
  if (!points->step.x.empty()) {
    Series s = points->step;
    s.label = name + " per step";
    s.colour = points->epoch.x.empty() ? (validation ? Colour::kOrange : Colour::kBlue)
                                       : (validation ? Colour::kLightOrange : Colour::kLightBlue);
    chart.series.push_back(std::move(s));
  }
  if (!points->epoch.x.empty()) {
    Series s = points->epoch;
    s.label = name + " per epoch";
    s.markers = true;
    s.colour = validation ? Colour::kOrange : Colour::kBlue;
    chart.series.push_back(std::move(s));
  }
  if (!points->eval.x.empty()) {
    Series s = points->eval;
    s.label = name + " per evaluation";
    s.markers = true;
    s.colour = validation ? Colour::kOrange : Colour::kBlue;
    chart.series.push_back(std::move(s));
  }
}

bool is_time(std::string_view name) { return name.substr(0, 5) == "time/"; }
bool is_validation(std::string_view name) { return name.substr(0, 4) == "val/"; }

struct NamedChart {
  std::string stem;
  Chart chart;
};

std::vector<NamedChart> plan_charts(const Columns& columns) {
  std::vector<NamedChart> charts;
  std::set<std::string> stems{"loss", "lr", "time"};

  Chart loss{"Loss", kStepAxis, "loss", {}};
  add_series(loss, columns, "train/loss", false);
  add_series(loss, columns, "val/loss", true);
  if (!loss.series.empty()) charts.push_back({"loss", std::move(loss)});

  for (const std::string& name : columns.names) {
    if (name == "train/loss" || name == "val/loss" || name == "lr" || is_time(name)) continue;
    Chart chart{name, kStepAxis, name, {}};
    add_series(chart, columns, name, is_validation(name));
    // Two names can sanitise to one stem ("val/acc" and "val_acc"): the later one gets a suffix.
    std::string stem = file_stem(name);
    for (int i = 2; stems.count(stem) != 0; ++i) stem = file_stem(name) + "_" + std::to_string(i);
    stems.insert(stem);
    charts.push_back({stem, std::move(chart)});
  }

  if (const Points* lr = columns.find("lr")) {
    Series s = lr->step.x.empty() ? lr->epoch : lr->step;
    s.label = lr->step.x.empty() ? "lr per epoch" : "lr per step";
    s.markers = lr->step.x.empty();
    s.colour = Colour::kGreen;
    charts.push_back({"lr", Chart{"Learning rate", kStepAxis, "learning rate", {std::move(s)}}});
  }

  Chart time{"Time per step", kStepAxis, "seconds", {}};
  int colour = 0;
  for (const std::string& name : columns.names) {
    if (!is_time(name)) continue;
    const Points& points = *columns.find(name);
    Series s = points.step.x.empty() ? points.epoch : points.step;
    s.label = name;
    s.markers = points.step.x.empty();
    s.colour = static_cast<Colour>(colour++ % 10);
    time.series.push_back(std::move(s));
  }
  if (!time.series.empty()) charts.push_back({"time", std::move(time)});
  return charts;
}

}  // namespace

std::vector<std::filesystem::path> draw_run_plots(const std::filesystem::path& run_dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(run_dir, ec))
    throw Error("cannot draw plots: the run directory " + run_dir.string() +
                (std::filesystem::exists(run_dir, ec) ? " is not a directory" : " does not exist") +
                ". Pass the directory a training run wrote (its run.output_dir), which holds history.jsonl.");
  const std::vector<NamedChart> charts = plan_charts(collect(detail::read_history(run_dir / "history.jsonl")));
  if (charts.empty()) return {};
  const std::filesystem::path plots_dir = run_dir / "plots";
  // Made here, never reached through a link planted in its place (security trial F6): that is
  // refused (ConfigError, exit 2) naming the link.
  try {
    make_own_directory(plots_dir);
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw Error(std::string("cannot draw plots: ") + e.what());
  }

  // Files are written while the renderer's lock is held, so two threads drawing the same run
  // never write the same file at once either.
  detail::ChartRenderer renderer(kPlotWidthPx, kPlotHeightPx);
  std::vector<std::filesystem::path> written;
  for (const NamedChart& named : charts) {
    const std::string png = renderer.render_png(named.chart);
    const std::filesystem::path file = plots_dir / (named.stem + ".png");
    write_file_atomically(file, png.data(), png.size());
    written.push_back(file);
  }
  return written;
}

}  // namespace tp
