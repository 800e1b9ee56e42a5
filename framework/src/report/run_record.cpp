#include "tp/framework/report/run_record.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "history_reader.h"
#include "tp/framework/config/monitor_mode.h"
#include "tp/framework/config/toml_text.h"
#include "tp/framework/error.h"
#include "tp/framework/util/file_lock.h"

namespace tp {
namespace {

toml::table read_run_file(const std::filesystem::path& file) {
  try {
    return tp::parse_toml_file(file);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw Error(file.string() + ":" + std::to_string(where.line) + ":" + std::to_string(where.column) + ": " +
                std::string(e.description()) + ". The host writes this file; it was damaged or edited by hand. "
                "Restore it or leave the run out of the comparison.");
  }
}

std::string text_value(const RunRecord& run, const std::string& key) {
  const auto it = run.config.find(key);
  return it == run.config.end() ? std::string() : it->second.display;
}

}  // namespace

void name_runs_apart(std::vector<RunRecord>& runs) {
  // Each directory's components, last first ("runs/a/" and "runs/a" alike).
  std::vector<std::vector<std::string>> parts(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::error_code ec;
    const std::filesystem::path full = std::filesystem::absolute(runs[i].dir, ec).lexically_normal();
    for (const auto& part : full)
      if (!part.empty() && part != "/") parts[i].insert(parts[i].begin(), part.string());
  }
  std::vector<std::size_t> depth(runs.size(), 1);
  const auto name_at = [&](std::size_t i) {
    std::string name;
    for (std::size_t k = std::min(depth[i], parts[i].size()); k-- > 0;) name += (name.empty() ? "" : "/") + parts[i][k];
    return name.empty() ? runs[i].name : name;
  };
  for (bool grew = true; grew;) {
    grew = false;
    std::map<std::string, std::vector<std::size_t>> holders;
    for (std::size_t i = 0; i < runs.size(); ++i) holders[name_at(i)].push_back(i);
    for (const auto& [name, group] : holders) {
      if (group.size() < 2) continue;
      // Deeper only while some member still has a component left and the members are not all one
      // directory (given twice, it stays as it is and gets its count).
      const bool deeper = std::any_of(group.begin(), group.end(), [&](std::size_t i) { return depth[i] < parts[i].size(); });
      const bool one_directory =
          std::all_of(group.begin(), group.end(), [&](std::size_t i) { return parts[i] == parts[group.front()]; });
      if (!deeper || one_directory) continue;
      for (std::size_t i : group) ++depth[i];
      grew = true;
    }
  }
  std::map<std::string, int> seen;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string name = name_at(i);
    const int count = ++seen[name];
    runs[i].name = count == 1 ? name : name + " (" + std::to_string(count) + ")";
  }
}

RunRecord read_run(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw ConfigError("", "the run directory '" + dir.string() + "' " +
                              (std::filesystem::exists(dir, ec) ? "is not a directory" : "does not exist") +
                              ". Pass the directories training runs wrote (their run.output_dir or --output-dir).");
  for (const char* file : {"config.toml", "history.jsonl"})
    if (!std::filesystem::exists(dir / file, ec))
      throw ConfigError("", "'" + dir.string() + "' has no " + file + ", so it is not a training run's directory "
                            "(or its training has not started). Pass the directory given as run.output_dir or "
                            "--output-dir when training.");
  RunRecord run;
  run.dir = dir;
  run.name = dir.lexically_normal().filename().string();
  if (run.name.empty()) run.name = dir.lexically_normal().parent_path().filename().string(); // "runs/a/"
  run.config = with_host_defaults(flatten_config(read_run_file(dir / "config.toml")));
  run.history = detail::read_history(dir / "history.jsonl");
  run.finished = std::filesystem::exists(dir / "report.toml", ec);
  run.running = lock_held_elsewhere(dir / "run.lock");
  if (run.finished) run.report = read_run_file(dir / "report.toml");
  if (std::filesystem::exists(dir / "runtime.toml", ec))
    run.world_size = read_run_file(dir / "runtime.toml")["world_size"].value<int64_t>().value_or(-1);
  return run;
}

std::vector<std::pair<double, double>> metric_points(const RunRecord& run, const std::string& name, bool* per_step) {
  std::vector<std::pair<double, double>> evaluated, stepped;
  for (const HistoryRecord& record : run.history) {
    double step = std::nan(""), value = std::nan("");
    bool carried = false;
    for (const auto& [key, v] : record.values) {
      if (key == "step") step = v;
      if (key == name) {
        value = v;
        carried = true;
      }
    }
    // A null is a value that was recorded non-finite (a diverged run): kept, as NaN.
    if (!std::isfinite(step) || !carried) continue;
    if (record.kind == "epoch" || record.kind == "eval") evaluated.emplace_back(step, value);
    else if (record.kind == "step") stepped.emplace_back(step, value);
  }
  const bool use_steps = evaluated.empty();
  if (per_step != nullptr) *per_step = use_steps;
  return use_steps ? stepped : evaluated;
}

bool higher_is_better(const RunRecord& run, const std::string& metric) {
  for (const char* table : {"checkpoint", "early_stopping"})
    if (const std::string mode = text_value(run, std::string(table) + ".mode");
        text_value(run, std::string(table) + ".monitor") == metric && mode != "auto")
      return mode == "max";
  // A value no mode speaks for: by its name, as mode = "auto" decides (a name that says neither:
  // higher, as most scores).
  return !lower_is_better_by_name(metric).value_or(false);
}

double report_number(const RunRecord& run, const std::string& key) {
  return run.report[key].value<double>().value_or(std::numeric_limits<double>::quiet_NaN());
}

}  // namespace tp
