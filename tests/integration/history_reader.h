// Reads <run dir>/history.jsonl as written by tp::History: one flat JSON object per line with a
// "kind" string and numeric (or null) values.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tp::test {

struct Row {
  std::string kind;
  std::map<std::string, double> values; ///< nulls are left out
  bool has(const std::string& name) const { return values.count(name) == 1; }
};

inline std::vector<Row> read_history(const std::filesystem::path& run_dir) {
  std::vector<Row> rows;
  std::ifstream in(run_dir / "history.jsonl");
  for (std::string line; std::getline(in, line);) {
    Row row;
    std::size_t at = 0;
    while ((at = line.find('"', at)) != std::string::npos) {
      const std::size_t end = line.find('"', at + 1);
      const std::string key = line.substr(at + 1, end - at - 1);
      std::size_t value = end + 2; // past `":`
      if (line[value] == '"') {
        const std::size_t close = line.find('"', value + 1);
        if (key == "kind") row.kind = line.substr(value + 1, close - value - 1);
        at = close + 1;
        continue;
      }
      char* stop = nullptr;
      const double number = std::strtod(line.c_str() + value, &stop);
      if (stop != line.c_str() + value) row.values[key] = number;
      at = line.find_first_of(",}", value) + 1;
    }
    rows.push_back(row);
  }
  return rows;
}

inline std::vector<Row> rows_of(const std::vector<Row>& rows, const std::string& kind) {
  std::vector<Row> out;
  for (const Row& row : rows)
    if (row.kind == kind) out.push_back(row);
  return out;
}

/// Every record of a run's history as (kind, values), measurements aside: wall-clock times,
/// throughput, peak memory and TFLOP/s differ between any two runs of the same training.
inline std::vector<std::pair<std::string, std::map<std::string, double>>> without_timings(
    const std::filesystem::path& run_dir) {
  std::vector<std::pair<std::string, std::map<std::string, double>>> out;
  for (const Row& row : read_history(run_dir)) {
    std::map<std::string, double> values;
    for (const auto& [name, value] : row.values)
      if (!name.starts_with("time/") && !name.starts_with("throughput/") && !name.starts_with("memory/") &&
          !name.starts_with("perf/"))
        values[name] = value;
    out.emplace_back(row.kind, values);
  }
  return out;
}

}  // namespace tp::test
