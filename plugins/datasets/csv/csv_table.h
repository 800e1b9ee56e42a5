// A numeric CSV file read once into memory: the chosen feature columns as float32 rows and the
// chosen target columns as float64 (checked to be integers for classification by the caller).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tp::csv {

/// How to read one file.
struct TableOptions {
  bool header = true;                 ///< first row holds column names (else names are "0", "1", ...)
  char delimiter = ',';
  std::vector<std::string> features;  ///< column names; empty: every column that is not a target
  std::vector<std::string> targets;   ///< column names; empty: the last column
};

/// The parsed table, row-major.
struct Table {
  std::vector<std::string> feature_names;
  std::vector<std::string> target_names;
  std::vector<float> features;  ///< rows x feature_names.size()
  std::vector<double> targets;  ///< rows x target_names.size()
  uint64_t rows = 0;
};

/// Reads `path` as RFC 4180 records (tp::datasets::CsvReader, plugins/datasets/common/csv_records.h):
/// cells may be double-quoted ("" escapes a quote, a quoted cell may span lines), a UTF-8
/// byte-order mark is dropped, blank lines are skipped.
/// Throws tp::cpp::Failure naming the file, and the line and column where it applies: a missing
/// file (TP_ERR_IO), an unknown column name (listing the real ones), a row with the wrong number
/// of cells, or a cell that is not a number (TP_ERR_CONFIG).
Table read_table(const std::string& path, const TableOptions& options);

}  // namespace tp::csv
