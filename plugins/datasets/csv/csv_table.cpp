#include "csv_table.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>

#include "tp/cpp/guard.h"

namespace tp::csv {
namespace {

using tp::cpp::Failure;

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

/// Splits one line into cells; quoted cells may hold the delimiter.
std::vector<std::string> split(const std::string& line, char delimiter) {
  std::vector<std::string> cells;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == delimiter) {
      cells.push_back(trim(cur));
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  cells.push_back(trim(cur));
  return cells;
}

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
  std::ifstream in(path);
  if (!in) throw Failure(TP_ERR_IO, "csv: cannot open '" + path + "'; check `path`");
  std::string line;
  int64_t number = 0;
  std::vector<std::string> names;
  std::vector<std::string> first_cells;
  int64_t first_line = 0;
  // 1. Column names: the header, or "0".."n-1" from the first data row.
  while (std::getline(in, line)) {
    ++number;
    if (trim(line).empty()) continue;
    first_cells = split(line, options.delimiter);
    first_line = number;
    break;
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
  while (std::getline(in, line)) {
    ++number;
    if (trim(line).empty()) continue;
    take_row(split(line, options.delimiter), number);
  }
  if (t.rows == 0) throw Failure(TP_ERR_CONFIG, "csv: '" + path + "' has no data rows");
  return t;
}

}  // namespace tp::csv
