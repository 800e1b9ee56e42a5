#include "csv_table.h"

#include <algorithm>
#include <charconv>
#include <fstream>

#include "csv_records.h"
#include "tp/cpp/guard.h"
#include "regular_input.h"

namespace tp::csv {
namespace {

using tp::cpp::Failure;

bool parse_number(const std::string& cell, double* out) {
  const char* b = cell.data();
  const char* e = b + cell.size();
  if (b != e && *b == '+') ++b;
  if (b == e) return false;
  const auto [ptr, ec] = std::from_chars(b, e, *out);
  return ec == std::errc() && ptr == e;
}

std::size_t column_of(const std::vector<std::string>& names, const std::string& name, const std::string& path) {
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    throw Failure(TP_ERR_CONFIG, "csv: column '" + name + "' is not in " + path + " (columns: " + known + ")");
  }
  return static_cast<std::size_t>(it - names.begin());
}

}  // namespace

Table read_table(const std::string& path, const TableOptions& options) {
  datasets::refuse_special_input(path, "csv", "`path`");
  std::ifstream in(path);
  if (!in) throw Failure(TP_ERR_IO, "csv: cannot open '" + path + "'; check `path`");
  // The records as RFC 4180 reads them (plugins/datasets/common/csv_records.h): quotes, a
  // byte-order mark, blank lines skipped.
  tp::datasets::CsvReader reader(in, path, "csv", options.delimiter);
  tp::datasets::CsvRecord record;
  std::vector<std::string> names;
  std::vector<std::string> first_cells;
  int64_t first_line = 0;
  // 1. Column names: the header, or "0".."n-1" from the first data row.
  if (reader.next(record)) {
    first_cells = record.cells;
    first_line = record.line;
  }
  if (first_cells.empty()) throw Failure(TP_ERR_CONFIG, "csv: '" + path + "' is empty");
  if (options.header) {
    names = first_cells;
    first_cells.clear();
  } else {
    for (std::size_t i = 0; i < first_cells.size(); ++i) names.push_back(std::to_string(i));
  }
  // 2. Which columns.
  std::vector<std::size_t> target_cols, feature_cols;
  if (options.targets.empty()) target_cols.push_back(names.size() - 1);
  for (const auto& n : options.targets) target_cols.push_back(column_of(names, n, path));
  if (options.features.empty()) {
    for (std::size_t c = 0; c < names.size(); ++c)
      if (std::find(target_cols.begin(), target_cols.end(), c) == target_cols.end()) feature_cols.push_back(c);
  } else {
    for (const auto& n : options.features) feature_cols.push_back(column_of(names, n, path));
  }
  if (feature_cols.empty()) throw Failure(TP_ERR_CONFIG, "csv: no feature column left in '" + path + "'");
  Table t;
  for (auto c : feature_cols) t.feature_names.push_back(names[c]);
  for (auto c : target_cols) t.target_names.push_back(names[c]);
  // 3. Rows.
  const auto take_row = [&](const std::vector<std::string>& cells, int64_t at) {
    if (cells.size() != names.size())
      throw Failure(TP_ERR_CONFIG, "csv: " + path + ":" + std::to_string(at) + ": " + std::to_string(cells.size()) +
                                       " cells, but the file has " + std::to_string(names.size()) + " columns");
    const auto value = [&](std::size_t c) {
      double v = 0;
      if (!parse_number(cells[c], &v))
        throw Failure(TP_ERR_CONFIG, "csv: " + path + ":" + std::to_string(at) + ": column '" + names[c] + "' (" +
                                         std::to_string(c + 1) + ") holds '" + cells[c] +
                                         "', which is not a number; clean the file or leave the column out of "
                                         "`features`");
      return v;
    };
    for (auto c : feature_cols) t.features.push_back(static_cast<float>(value(c)));
    for (auto c : target_cols) t.targets.push_back(value(c));
    ++t.rows;
  };
  if (!first_cells.empty()) take_row(first_cells, first_line);
  while (reader.next(record)) take_row(record.cells, record.line);
  if (t.rows == 0) throw Failure(TP_ERR_CONFIG, "csv: '" + path + "' has no data rows");
  return t;
}

}  // namespace tp::csv
