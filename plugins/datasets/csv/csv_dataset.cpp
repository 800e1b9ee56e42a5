// The `csv` plugin: component org.torchhost.csv, a Tier S dataset of numeric table rows
// (see README.md). This file holds the schema and the dataset class (tp/cpp/dataset_adapter.h
// makes the C ABI shell); csv_table.cpp parses the file.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "csv_table.h"
#include "tp/cpp/dataset_adapter.h"
#include "tp/cpp/random.h"
#include "tp/tp.h"

namespace {

using tp::cpp::Failure;

/* Schema */

const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "path", TP_CFG_PATH, nullptr, "CSV file of the train split"},
    {sizeof(tp_config_key_t), "val_path", TP_CFG_PATH, "\"\"",
     "CSV file of the val split (same columns); empty: see val_split"},
    {sizeof(tp_config_key_t), "val_split", TP_CFG_FLOAT, "0.0",
     "without val_path: fraction of the rows held out as val, chosen by split_seed"},
    {sizeof(tp_config_key_t), "split_seed", TP_CFG_INT, "0", "seed of the val_split choice"},
    {sizeof(tp_config_key_t), "header", TP_CFG_BOOL, "true",
     "first row names the columns (else columns are named \"0\", \"1\", ...)"},
    {sizeof(tp_config_key_t), "delimiter", TP_CFG_STRING, "\",\"", "one character separating cells"},
    {sizeof(tp_config_key_t), "features", TP_CFG_STRING_ARRAY, "[]",
     "feature columns by name, in this order; []: every column that is not a target"},
    {sizeof(tp_config_key_t), "targets", TP_CFG_STRING_ARRAY, "[]", "target columns by name; []: the last column"},
    {sizeof(tp_config_key_t), "task", TP_CFG_STRING, "\"classification\"",
     "classification: one integer target -> `target` int64 []; regression: `target` float32 [k]"},
};

// get_sample only reads: no TP_DESCRIPTOR_SERIAL.
const tp_descriptor_t kDescriptor = tp::cpp::dataset_descriptor(
    "org.torchhost.csv", "1.0.0", "numeric CSV rows: features float32 [n], target int64 [] or float32 [k]", kKeys);

/* Instance */

/// Rows of `split` under a seeded val_split (tp::cpp::seeded_holdout: round(n * fraction) rows
/// held out as val); both parts keep file order.
std::vector<uint64_t> split_rows(uint64_t n, double fraction, uint64_t seed, bool train) {
  const std::vector<bool> is_val = tp::cpp::seeded_holdout(n, fraction, seed, "csv", "rows");
  std::vector<uint64_t> rows;
  for (uint64_t i = 0; i < n; ++i)
    if (is_val[i] != train) rows.push_back(i);
  return rows;
}

void check_classification(const tp::csv::Table& t, const std::string& path) {
  if (t.target_names.size() != 1)
    throw Failure(TP_ERR_CONFIG, "csv: task = \"classification\" needs exactly one target column, got " +
                                     std::to_string(t.target_names.size()) + "; use task = \"regression\" for several");
  for (uint64_t r = 0; r < t.rows; ++r) {
    const double v = t.targets[r];
    if (v < 0 || v != std::floor(v) || v > 9.0e15)
      throw Failure(TP_ERR_CONFIG, "csv: " + path + ": row " + std::to_string(r + 1) + " has class '" +
                                       std::to_string(v) + "' in column '" + t.target_names[0] +
                                       "', not a non-negative integer class id (task = \"classification\"); for a "
                                       "numeric target use task = \"regression\"");
  }
}

/// One split: the rows it holds (indices into the table). Immutable after construction.
class CsvDataset {
 public:
  explicit CsvDataset(const tp::cpp::DatasetArgs& args) {
    const tp::cpp::ConfigReader& cfg = args.config;
    tp::csv::TableOptions options;
    options.header = cfg.get_bool("header");
    const std::string delimiter = cfg.get_string("delimiter");
    if (delimiter.size() != 1) throw Failure(TP_ERR_CONFIG, "csv: delimiter must be one character, got '" + delimiter + "'");
    options.delimiter = delimiter[0];
    options.features = cfg.get_string_array("features");
    options.targets = cfg.get_string_array("targets");
    const std::string task = cfg.get_string("task");
    if (task != "classification" && task != "regression")
      throw Failure(TP_ERR_CONFIG, "csv: task = \"" + task + "\"; expected \"classification\" or \"regression\"");
    const std::string path = cfg.get_string("path");
    const std::string val_path = cfg.get_string("val_path");
    const double val_split = cfg.get_float("val_split");
    if (!(val_split >= 0.0 && val_split < 1.0)) throw Failure(TP_ERR_CONFIG, "csv: val_split must be in [0, 1)");
    if (!val_path.empty() && val_split > 0.0)
      throw Failure(TP_ERR_CONFIG, "csv: set either val_path or val_split, not both");
    if (!args.train() && val_path.empty() && val_split == 0.0)
      throw Failure(TP_ERR_CONFIG, "csv: the val split needs `val_path` or `val_split` > 0 (or set eval.strategy = \"no\")");

    classification_ = task == "classification";
    const std::string file = !args.train() && !val_path.empty() ? val_path : path;
    table_ = tp::csv::read_table(file, options);
    if (classification_) check_classification(table_, file);
    if (val_split > 0.0) {
      rows_ = split_rows(table_.rows, val_split, static_cast<uint64_t>(cfg.get_int("split_seed")), args.train());
    } else {
      for (uint64_t r = 0; r < table_.rows; ++r) rows_.push_back(r);
    }
  }

  uint64_t size() const { return rows_.size(); }

  void get_sample(uint64_t index, const tp::cpp::WorkerContext&, tp::cpp::Sample& out) const {
    const uint64_t row = rows_[index];
    const std::size_t nf = table_.feature_names.size(), nt = table_.target_names.size();
    const float* f = table_.features.data() + row * nf;
    out.add("features", std::vector<float>(f, f + nf), {static_cast<int64_t>(nf)});
    const double* y = table_.targets.data() + row * nt;
    if (classification_) out.add("target", std::vector<int64_t>{static_cast<int64_t>(y[0])}, {});
    else out.add("target", std::vector<float>(y, y + nt), {static_cast<int64_t>(nt)});
  }

 private:
  tp::csv::Table table_;
  std::vector<uint64_t> rows_;
  bool classification_ = true;
};

}  // namespace

TP_DEFINE_DATASET_PLUGIN("csv", CsvDataset, kDescriptor)
