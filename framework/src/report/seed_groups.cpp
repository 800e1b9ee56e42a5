#include "tp/framework/report/seed_groups.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "table_cells.h"
#include "tp/framework/monitor/history.h"

namespace tp {
namespace {

using detail::csv_cell;
using detail::markdown_cell;

constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();
constexpr const char* kSeedKey = "run.seed";

struct MeanStd {
  double mean = kMissing;
  double std = kMissing;
  int count = 0;
};

// Over the finite values, as pandas' mean() and std() skip NaN: a diverged seed is counted
// apart (finite_final), not averaged in.
MeanStd mean_std(const std::vector<double>& values) {
  MeanStd out;
  double sum = 0.0;
  for (const double v : values)
    if (std::isfinite(v)) {
      sum += v;
      ++out.count;
    }
  if (out.count == 0) return out;
  out.mean = sum / out.count;
  if (out.count < 2) return out;
  double squares = 0.0;
  for (const double v : values)
    if (std::isfinite(v)) squares += (v - out.mean) * (v - out.mean);
  out.std = std::sqrt(squares / (out.count - 1));
  return out;
}

std::string exact(double value) { return std::isfinite(value) ? format_number(value) : ""; }

std::string rounded(double mean, double std) {
  if (!std::isfinite(mean)) return "-";
  char text[64];
  if (std::isfinite(std)) std::snprintf(text, sizeof text, "%.4f ± %.4f", mean, std);
  else std::snprintf(text, sizeof text, "%.4f", mean);
  return text;
}

}  // namespace

SeedGroups group_over_seeds(const Comparison& comparison) {
  SeedGroups out;
  out.metric = comparison.metric;
  std::ptrdiff_t seed_column = -1;
  std::vector<std::size_t> columns; // the comparison's key columns that define a setting
  for (std::size_t i = 0; i < comparison.keys.size(); ++i) {
    if (comparison.keys[i] == kSeedKey) {
      seed_column = static_cast<std::ptrdiff_t>(i);
      continue;
    }
    columns.push_back(i);
    out.keys.push_back(comparison.keys[i]);
  }
  if (seed_column < 0) return out;
  std::vector<std::vector<const ComparisonRow*>> members;
  for (const ComparisonRow& row : comparison.rows) {
    std::vector<FlatValue> setting;
    for (const std::size_t c : columns) setting.push_back(row.config[c]);
    std::size_t g = 0;
    while (g < out.groups.size() && !(out.groups[g].config == setting)) ++g;
    if (g == out.groups.size()) {
      SeedGroup group;
      group.config = setting;
      out.groups.push_back(std::move(group));
      members.emplace_back();
    }
    out.groups[g].seeds.push_back(row.config[static_cast<std::size_t>(seed_column)].display);
    members[g].push_back(&row);
  }
  bool any_pair = false;
  for (std::size_t g = 0; g < out.groups.size(); ++g) {
    std::vector<double> finals, bests;
    for (const ComparisonRow* row : members[g]) {
      finals.push_back(row->final_metric);
      bests.push_back(row->best_metric);
    }
    const MeanStd final_values = mean_std(finals), best_values = mean_std(bests);
    SeedGroup& group = out.groups[g];
    group.final_mean = final_values.mean;
    group.final_std = final_values.std;
    group.finite_final = final_values.count;
    group.best_mean = best_values.mean;
    group.best_std = best_values.std;
    any_pair = any_pair || members[g].size() > 1;
  }
  if (!any_pair) out.groups.clear();
  return out;
}

std::string seed_groups_csv(const SeedGroups& groups) {
  std::string out;
  for (const std::string& key : groups.keys) out += csv_cell(key) + ",";
  const std::string& m = groups.metric;
  out += "seeds,seed_values," + csv_cell("final " + m + " mean") + "," + csv_cell("final " + m + " std") + "," +
         csv_cell("best " + m + " mean") + "," + csv_cell("best " + m + " std") + ",finite_final\n";
  for (const SeedGroup& g : groups.groups) {
    for (const FlatValue& value : g.config) out += csv_cell(value.display) + ",";
    std::string seeds;
    for (const std::string& seed : g.seeds) seeds += (seeds.empty() ? "" : " ") + seed;
    out += std::to_string(g.seeds.size()) + "," + csv_cell(seeds) + "," + exact(g.final_mean) + "," +
           exact(g.final_std) + "," + exact(g.best_mean) + "," + exact(g.best_std) + "," +
           std::to_string(g.finite_final) + "\n";
  }
  return out;
}

std::string seed_groups_markdown(const SeedGroups& groups) {
  std::string out = "|";
  for (const std::string& key : groups.keys) out += " " + markdown_cell(key) + " |";
  out += " seeds | final " + markdown_cell(groups.metric) + " (mean ± std) | best " + markdown_cell(groups.metric) +
         " (mean ± std) |\n|";
  for (std::size_t i = 0; i < groups.keys.size(); ++i) out += "---|";
  out += "---:|---:|---:|\n";
  for (const SeedGroup& g : groups.groups) {
    out += "|";
    for (const FlatValue& value : g.config) out += " " + markdown_cell(value.literal.empty() ? "-" : value.display) + " |";
    const std::string diverged =
        g.finite_final < static_cast<int>(g.seeds.size())
            ? " (" + std::to_string(static_cast<int>(g.seeds.size()) - g.finite_final) + " not finite)"
            : "";
    out += " " + std::to_string(g.seeds.size()) + " | " + rounded(g.final_mean, g.final_std) + diverged + " | " +
           rounded(g.best_mean, g.best_std) + " |\n";
  }
  return out;
}

}  // namespace tp
