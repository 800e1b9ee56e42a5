#include "tp/framework/report/comparison.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>

#include "table_cells.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

using detail::csv_cell;
using detail::markdown_cell;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The keys on which the runs do not all agree (a key only some runs have counts as differing).
std::vector<std::string> keys_that_differ(const std::vector<RunRecord>& runs) {
  std::set<std::string> all;
  for (const RunRecord& run : runs)
    for (const auto& [key, value] : run.config)
      if (run_location_keys().count(key) == 0) all.insert(key);
  std::vector<std::string> out;
  for (const std::string& key : all) {
    std::optional<FlatValue> first;
    bool differs = false;
    for (std::size_t i = 0; i < runs.size() && !differs; ++i) {
      const auto it = runs[i].config.find(key);
      const std::optional<FlatValue> value =
          it == runs[i].config.end() ? std::nullopt : std::optional<FlatValue>(it->second);
      if (i == 0) first = value;
      else differs = first.has_value() != value.has_value() || (first && !(*first == *value));
    }
    if (differs) out.push_back(key);
  }
  return out;
}

std::string known_values(const RunRecord& run) {
  std::set<std::string> names;
  for (const HistoryRecord& record : run.history)
    for (const auto& [name, value] : record.values)
      if (name != "step" && name != "epoch") names.insert(name);
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "none" : out;
}

// A number of the run's config.toml, NaN when it has none.
double config_number(const RunRecord& run, const std::string& key) {
  const auto it = run.config.find(key);
  if (it == run.config.end()) return kNaN;
  char* end = nullptr;
  const double value = std::strtod(it->second.display.c_str(), &end);
  return end != it->second.display.c_str() ? value : kNaN;
}

ComparisonRow row_of(const RunRecord& run, const std::vector<std::string>& keys, const std::string& metric,
                     const std::string& mode) {
  ComparisonRow row;
  row.run = run.name;
  for (const std::string& key : keys) {
    const auto it = run.config.find(key);
    row.config.push_back(it == run.config.end() ? FlatValue{} : it->second);
  }
  row.finished = run.finished;
  row.running = run.running;
  row.ranks = run.world_size;
  const double batch = config_number(run, "train.batch_size"), accumulation = config_number(run, "train.grad_accum_steps");
  row.global_batch = run.world_size > 0 ? batch * (std::isfinite(accumulation) ? accumulation : 1.0) * double(run.world_size)
                                        : kNaN;
  const auto points = metric_points(run, metric);
  if (points.empty() && run.finished)
    throw ConfigError("--metric", "the run '" + run.dir.string() + "' never recorded '" + metric +
                                      "' in its history.jsonl (it has: " + known_values(run) +
                                      "). Pass --metric with one of those.");
  // The last value as recorded (NaN when the run ended diverged: an earlier finite value would
  // look healthy); the best over the finite ones, NaN when there are none.
  row.final_metric = points.empty() ? kNaN : points.back().second;
  const bool higher = mode.empty() ? higher_is_better(run, metric) : mode == "max";
  row.best_metric = kNaN;
  for (const auto& [step, value] : points)
    if (std::isfinite(value))
      row.best_metric = std::isnan(row.best_metric) ? value
                        : higher                    ? std::max(row.best_metric, value)
                                                    : std::min(row.best_metric, value);
  // Length and training time from the history, which is what the run did (resumes included).
  double epoch_seconds = 0.0, samples = 0.0, timed_steps = 0.0, previous_step = 0.0;
  int epochs_timed = 0;
  for (const HistoryRecord& record : run.history) {
    double epoch = kNaN, seconds = kNaN, rate = kNaN, step = kNaN;
    for (const auto& [name, value] : record.values) {
      if (name == "step" && std::isfinite(value)) row.steps = std::max(row.steps, static_cast<int64_t>(value));
      if (name == "step") step = value;
      if (name == "epoch") epoch = value;
      if (name == "time/epoch_s") seconds = value;
      if (name == "throughput/samples_per_s") rate = value;
    }
    if (record.kind != "epoch") continue;
    if (std::isfinite(epoch)) row.epochs = std::max(row.epochs, static_cast<int64_t>(epoch));
    // An epoch record's step is the count at its end: the steps it timed are those since the last one.
    const double steps_of_epoch = std::isfinite(step) ? step - previous_step : kNaN;
    if (std::isfinite(step)) previous_step = step;
    if (!std::isfinite(seconds)) continue;
    epoch_seconds += seconds;
    ++epochs_timed;
    if (std::isfinite(rate)) samples += rate * seconds;
    if (std::isfinite(steps_of_epoch)) timed_steps += steps_of_epoch;
  }
  row.epoch_s = epochs_timed > 0 ? epoch_seconds / epochs_timed : kNaN;
  // The history's throughput is rank 0's; every rank trains as many batches (training pads the
  // tail), so all ranks together process ranks times as many (experiment trial F8: a 2-rank
  // cell read as half its speed beside a 1-rank one).
  const double ranks = run.world_size > 0 ? double(run.world_size) : 1.0;
  row.train_samples_per_s = epoch_seconds > 0 ? ranks * samples / epoch_seconds : kNaN;
  row.train_ms_per_step = timed_steps > 0 ? 1e3 * epoch_seconds / timed_steps : kNaN;
  row.wall_s = report_number(run, "train_seconds");
  row.peak_device_mb = report_number(run, "peak_device_mb");
  row.peak_host_mb = report_number(run, "peak_host_mb");
  row.fit_ms_per_step = report_number(run, "ms_per_step");
  row.data_wait_ms = report_number(run, "data_wait_ms");
  row.forward_ms = report_number(run, "forward_ms");
  row.backward_ms = report_number(run, "backward_ms");
  row.optimizer_ms = report_number(run, "optimizer_ms");
  return row;
}

/* Formatting */

struct Column {
  std::string name;
  const char* format; ///< printf format for reading (Markdown, text)
};

// The table as cells: `exact` numbers (CSV) or rounded ones (Markdown, text); `missing` for NaN.
std::vector<std::vector<std::string>> cells(const Comparison& c, bool exact, const std::string& missing) {
  std::vector<Column> numbers{{"final " + c.metric, "%.4f"}, {"best " + c.metric, "%.4f"},
                              {"epochs", "%.0f"}, {"steps", "%.0f"}, {"ranks", "%.0f"}, {"global_batch", "%.0f"},
                              {"wall_s", "%.1f"}, {"epoch_s", "%.2f"},
                              {"train_samples_per_s", "%.0f"}, {"train_ms_per_step", "%.2f"},
                              {"fit_ms_per_step", "%.2f"}, {"peak_device_mb", "%.0f"}, {"peak_host_mb", "%.0f"},
                              {"data_wait_ms", "%.2f"}, {"forward_ms", "%.2f"},
                              {"backward_ms", "%.2f"}, {"optimizer_ms", "%.2f"}};
  std::vector<std::vector<std::string>> out;
  std::vector<std::string> header{"run"};
  header.insert(header.end(), c.keys.begin(), c.keys.end());
  for (const Column& column : numbers) header.push_back(column.name);
  header.emplace_back("finished");
  out.push_back(header);
  for (const ComparisonRow& r : c.rows) {
    std::vector<std::string> line{r.run};
    for (const FlatValue& value : r.config) line.push_back(value.literal.empty() ? missing : value.display);
    const double values[] = {r.final_metric, r.best_metric, r.epochs < 0 ? kNaN : double(r.epochs),
                             r.steps < 0 ? kNaN : double(r.steps), r.ranks < 0 ? kNaN : double(r.ranks),
                             r.global_batch, r.wall_s, r.epoch_s, r.train_samples_per_s,
                             r.train_ms_per_step, r.fit_ms_per_step, r.peak_device_mb, r.peak_host_mb, r.data_wait_ms,
                             r.forward_ms,
                             r.backward_ms, r.optimizer_ms};
    for (std::size_t i = 0; i < numbers.size(); ++i) {
      if (!std::isfinite(values[i])) {
        line.push_back(missing);
      } else if (exact) {
        line.push_back(format_number(values[i]));
      } else {
        char text[64];
        std::snprintf(text, sizeof text, numbers[i].format, values[i]);
        line.push_back(text);
      }
    }
    line.emplace_back(r.finished ? "yes" : r.running ? "running" : "no");
    out.push_back(line);
  }
  return out;
}

}  // namespace

std::string default_metric(const std::vector<RunRecord>& runs) {
  std::set<std::string> monitors;
  std::string listing;
  // A run that recorded nothing (a sweep's cell stopped by its sanity check, a monitor typo among
  // them) has no say, unless no run recorded anything (experiment trial F6).
  const bool any_recorded = std::any_of(runs.begin(), runs.end(), [](const RunRecord& r) { return !r.history.empty(); });
  for (const RunRecord& run : runs) {
    if (any_recorded && run.history.empty()) continue;
    const auto it = run.config.find("checkpoint.monitor");
    const std::string monitor = it == run.config.end() ? "val/loss" : it->second.display;
    monitors.insert(monitor);
    listing += (listing.empty() ? "" : ", ") + run.name + ": " + monitor;
  }
  if (monitors.size() != 1)
    throw ConfigError("--metric", "the runs monitor different metrics (checkpoint.monitor of " + listing +
                                      "); say which one to compare with --metric NAME.");
  return *monitors.begin();
}

Comparison compare_runs(const std::vector<RunRecord>& runs, const std::string& metric, const std::string& mode) {
  TP_CHECK(!runs.empty(), "compare_runs: no runs");
  TP_CHECK(mode.empty() || mode == "min" || mode == "max", "compare_runs: mode '" + mode + "' is not min or max");
  Comparison comparison;
  comparison.metric = metric;
  comparison.keys = keys_that_differ(runs);
  for (const RunRecord& run : runs) comparison.rows.push_back(row_of(run, comparison.keys, metric, mode));
  return comparison;
}

std::string comparison_csv(const Comparison& comparison) {
  std::string out;
  for (const auto& line : cells(comparison, true, "")) {
    for (std::size_t i = 0; i < line.size(); ++i) out += (i ? "," : "") + csv_cell(line[i]);
    out += "\n";
  }
  return out;
}

std::string comparison_markdown(const Comparison& comparison) {
  const auto table = cells(comparison, false, "-");
  std::string out;
  for (std::size_t row = 0; row < table.size(); ++row) {
    out += "|";
    for (const std::string& cell : table[row]) out += " " + markdown_cell(cell) + " |";
    out += "\n";
    if (row != 0) continue;
    out += "|";
    // Numbers right-aligned, names and config values left-aligned.
    for (std::size_t i = 0; i < table[row].size(); ++i) out += i <= comparison.keys.size() ? "---|" : "---:|";
    out += "\n";
  }
  return out;
}

std::string comparison_text(const Comparison& comparison) {
  const auto table = cells(comparison, false, "-");
  std::vector<std::size_t> widths(table.front().size(), 0);
  for (const auto& line : table)
    for (std::size_t i = 0; i < line.size(); ++i) widths[i] = std::max(widths[i], line[i].size());
  std::string out;
  for (const auto& line : table) {
    std::string text;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const std::string pad(widths[i] - line[i].size(), ' ');
      text += (i ? "  " : "") + (i <= comparison.keys.size() ? line[i] + pad : pad + line[i]);
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  }
  return out;
}

}  // namespace tp
