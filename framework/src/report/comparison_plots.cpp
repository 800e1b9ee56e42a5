// The comparison's overlay charts: one line per run, over the optimizer step and over training
// time, drawn with the run plots' renderer (chart.h).
#include <cmath>

#include "chart.h"
#include "file_stem.h"
#include "tp/framework/error.h"
#include "tp/framework/report/comparison.h"
#include "tp/framework/report/plots.h"
#include "tp/framework/util/atomic_file.h"

namespace tp {
namespace {

using detail::Chart;
using detail::Colour;
using detail::Series;
using CurvePoints = std::vector<std::pair<double, double>>;

// (step, seconds of training up to that step), from step 0. Step records carry time/step_s, the
// mean over the steps since the previous step record; epoch records' time/epoch_s is the
// coarser fallback for a history logged less often than once per epoch.
CurvePoints training_clock(const RunRecord& run) {
  CurvePoints from_steps{{0.0, 0.0}}, from_epochs{{0.0, 0.0}};
  for (const HistoryRecord& record : run.history) {
    double step = std::nan(""), step_s = std::nan(""), epoch_s = std::nan("");
    for (const auto& [name, value] : record.values) {
      if (name == "step") step = value;
      if (name == "time/step_s") step_s = value;
      if (name == "time/epoch_s") epoch_s = value;
    }
    if (record.kind == "step" && std::isfinite(step) && std::isfinite(step_s) && step > from_steps.back().first)
      from_steps.emplace_back(step, from_steps.back().second + (step - from_steps.back().first) * step_s);
    if (record.kind == "epoch" && std::isfinite(step) && std::isfinite(epoch_s) && step > from_epochs.back().first)
      from_epochs.emplace_back(step, from_epochs.back().second + epoch_s);
  }
  return from_steps.size() > 1 ? from_steps : from_epochs;
}

// The clock at `step`: linear between its points, continued at the last rate past the end.
double seconds_at(const CurvePoints& clock, double step) {
  if (clock.size() < 2) return std::nan("");
  std::size_t i = 1;
  while (i + 1 < clock.size() && clock[i].first < step) ++i;
  const auto& [s0, t0] = clock[i - 1];
  const auto& [s1, t1] = clock[i];
  return t0 + (step - s0) * (t1 - t0) / (s1 - s0);
}

// train/loss per logged step, or per epoch when no step record has it.
CurvePoints loss_points(const RunRecord& run, bool& per_step) {
  CurvePoints stepped, epochs;
  for (const HistoryRecord& record : run.history) {
    double step = std::nan(""), loss = std::nan("");
    for (const auto& [name, value] : record.values) {
      if (name == "step") step = value;
      if (name == "train/loss") loss = value;
    }
    if (!std::isfinite(step) || !std::isfinite(loss)) continue;
    if (record.kind == "step") stepped.emplace_back(step, loss);
    if (record.kind == "epoch") epochs.emplace_back(step, loss);
  }
  per_step = !stepped.empty();
  return per_step ? stepped : epochs;
}

std::string label_of(const Comparison& comparison, const ComparisonRow& row) {
  std::string label;
  for (std::size_t i = 0; i < comparison.keys.size(); ++i) {
    const std::string& key = comparison.keys[i];
    const std::string leaf = key.substr(key.find_last_of('.') + 1);
    label += (label.empty() ? "" : " ") + leaf + "=" + (row.config[i].literal.empty() ? "-" : row.config[i].display);
  }
  return label.empty() ? row.run : label;
}

Series series_of(const CurvePoints& points, const CurvePoints* clock, bool markers, std::size_t index, std::string label) {
  Series s;
  s.label = std::move(label);
  s.markers = markers;
  s.colour = static_cast<Colour>(index % 10); // tab10; an eleventh run repeats the first colour
  for (const auto& [step, value] : points) {
    s.x.push_back(clock == nullptr ? step : seconds_at(*clock, step));
    s.y.push_back(value);
  }
  return s;
}

}  // namespace

std::vector<std::filesystem::path> draw_comparison_plots(const std::vector<RunRecord>& runs,
                                                         const Comparison& comparison,
                                                         const std::filesystem::path& out_dir) {
  constexpr const char* kStepAxis = "optimizer step";
  constexpr const char* kTimeAxis = "training time (s)";
  const std::string& metric = comparison.metric;
  Chart loss_step{"train/loss by step", kStepAxis, "train/loss", {}};
  Chart loss_time{"train/loss by training time", kTimeAxis, "train/loss", {}, /*x_counts=*/false};
  Chart metric_step{metric + " by step", kStepAxis, metric, {}};
  Chart metric_time{metric + " by training time", kTimeAxis, metric, {}, /*x_counts=*/false};
  for (std::size_t i = 0; i < runs.size() && i < comparison.rows.size(); ++i) {
    const std::string label = label_of(comparison, comparison.rows[i]);
    const CurvePoints clock = training_clock(runs[i]);
    bool per_step = false;
    const CurvePoints loss = loss_points(runs[i], per_step);
    if (!loss.empty()) {
      loss_step.series.push_back(series_of(loss, nullptr, !per_step, i, label));
      if (clock.size() > 1) loss_time.series.push_back(series_of(loss, &clock, !per_step, i, label));
    }
    const CurvePoints values = metric_points(runs[i], metric, &per_step);
    if (!values.empty()) {
      metric_step.series.push_back(series_of(values, nullptr, !per_step, i, label));
      if (clock.size() > 1) metric_time.series.push_back(series_of(values, &clock, !per_step, i, label));
    }
  }
  const std::string stem = "comparison_" + detail::file_stem(metric);
  const std::vector<std::pair<std::string, const Chart*>> charts{{"comparison_loss_step", &loss_step},
                                                                  {"comparison_loss_time", &loss_time},
                                                                  {stem + "_step", &metric_step},
                                                                  {stem + "_time", &metric_time}};
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw Error("cannot draw the comparison plots: cannot create " + out_dir.string() + ": " + ec.message() + ".");
  detail::ChartRenderer renderer(kPlotWidthPx, kPlotHeightPx);
  std::vector<std::filesystem::path> written;
  for (const auto& [name, chart] : charts) {
    if (chart->series.empty()) continue;
    const std::string png = renderer.render_png(*chart);
    const std::filesystem::path file = out_dir / (name + ".png");
    write_file_atomically(file, png.data(), png.size());
    written.push_back(file);
  }
  return written;
}

}  // namespace tp
