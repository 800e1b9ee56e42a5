// The `csv` plugin: component org.torchhost.csv, a Tier S dataset of numeric table rows
// (see README.md). This file is the C ABI glue; csv_table.cpp parses the file.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "csv_table.h"
#include "tp/cpp/config.h"
#include "tp/cpp/dlpack.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/plugin.h"
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

const tp_descriptor_t kDescriptor = {
    sizeof(tp_descriptor_t),
    "org.torchhost.csv",
    TP_KIND_DATASET,
    TP_TIER_S,
    "1.0.0",
    "numeric CSV rows: features float32 [n], target int64 [] or float32 [k]",
    kKeys,
    static_cast<uint32_t>(std::size(kKeys)),
    nullptr,
    0,
    0,  // get_sample only reads: no TP_DESCRIPTOR_SERIAL
};

/* Instance */

constexpr const char* kFeatures = "features";
constexpr const char* kTarget = "target";

/// One split: the rows it holds (indices into the table). Immutable after create().
struct CsvDataset {
  const tp_host_t* host = nullptr;
  tp::csv::Table table;
  std::vector<uint64_t> rows;
  bool classification = true;
};

const CsvDataset& as_dataset(const void* self) {
  if (self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "csv: dataset instance is NULL");
  return *static_cast<const CsvDataset*>(self);
}

const tp_host_t* host_of(const void* self) {
  return self != nullptr ? static_cast<const CsvDataset*>(self)->host : tp::cpp::plugin_host();
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// Rows of `split` under a seeded val_split: val = round(n * fraction) rows picked by a
/// Fisher-Yates shuffle of splitmix64(seed); both parts keep file order.
std::vector<uint64_t> split_rows(uint64_t n, double fraction, uint64_t seed, bool train) {
  const auto k = static_cast<uint64_t>(static_cast<double>(n) * fraction + 0.5);
  if (k == 0 || k >= n)
    throw Failure(TP_ERR_CONFIG, "csv: val_split = " + std::to_string(fraction) + " of " + std::to_string(n) +
                                     " rows leaves an empty train or val split");
  std::vector<uint64_t> perm(n);
  for (uint64_t i = 0; i < n; ++i) perm[i] = i;
  uint64_t state = seed;
  for (uint64_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[splitmix64(state) % (i + 1)]);
  std::vector<bool> is_val(n, false);
  for (uint64_t i = 0; i < k; ++i) is_val[perm[i]] = true;
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

/* tp.dataset/1 */

tp_status csv_create(const tp_host_t* host, const tp_config_t* raw_cfg, const char* split, void** out_self) {
  TP_GUARD(host, {
    if (out_self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "csv: out_self is NULL");
    *out_self = nullptr;
    const std::string name = split != nullptr ? split : "(null)";
    if (name != "train" && name != "val")
      throw Failure(TP_ERR_INVALID_ARGUMENT, "csv: unknown split '" + name + "' (expected \"train\" or \"val\")");
    const bool train = name == "train";
    const tp::cpp::ConfigReader cfg(raw_cfg);
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
    if (!train && val_path.empty() && val_split == 0.0)
      throw Failure(TP_ERR_CONFIG, "csv: the val split needs `val_path` or `val_split` > 0 (or set eval.strategy = \"no\")");

    auto ds = std::make_unique<CsvDataset>();
    ds->host = host;
    ds->classification = task == "classification";
    const std::string file = !train && !val_path.empty() ? val_path : path;
    ds->table = tp::csv::read_table(file, options);
    if (ds->classification) check_classification(ds->table, file);
    if (val_split > 0.0) {
      ds->rows = split_rows(ds->table.rows, val_split, static_cast<uint64_t>(cfg.get_int("split_seed")), train);
    } else {
      for (uint64_t r = 0; r < ds->table.rows; ++r) ds->rows.push_back(r);
    }
    *out_self = ds.release();
    return TP_OK;
  });
}

void csv_destroy(void* self) { delete static_cast<CsvDataset*>(self); }

tp_status csv_size(const void* self, uint64_t* out_count) {
  TP_GUARD(host_of(self), {
    if (out_count == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "csv: out_count is NULL");
    *out_count = as_dataset(self).rows.size();
    return TP_OK;
  });
}

tp_status csv_get_sample(const void* self, uint64_t index, const tp_worker_ctx_t* ctx, tp_field_t* out_fields,
                         uint32_t capacity, uint32_t* out_count) {
  TP_GUARD(host_of(self), {
    const CsvDataset& ds = as_dataset(self);
    if (out_fields == nullptr || out_count == nullptr)
      throw Failure(TP_ERR_INVALID_ARGUMENT, "csv: out_fields or out_count is NULL");
    *out_count = 0;
    if (index >= ds.rows.size())
      throw Failure(TP_ERR_OUT_OF_RANGE, "csv: index " + std::to_string(index) + " is out of range (size " +
                                             std::to_string(ds.rows.size()) + ")");
    if (capacity < 2) throw Failure(TP_ERR_INVALID_ARGUMENT, "csv: capacity " + std::to_string(capacity) + " < 2");
    const tp::csv::Table& t = ds.table;
    const uint64_t row = ds.rows[index];
    const std::size_t nf = t.feature_names.size(), nt = t.target_names.size();
    tp_field_t made[2] = {};
    uint32_t n = 0;
    try {
      const float* f = t.features.data() + row * nf;
      made[n++] = tp::cpp::make_field(kFeatures, std::vector<float>(f, f + nf), {static_cast<int64_t>(nf)});
      const double* y = t.targets.data() + row * nt;
      if (ds.classification) {
        made[n++] = tp::cpp::make_field(kTarget, std::vector<int64_t>{static_cast<int64_t>(y[0])}, {});
      } else {
        made[n++] = tp::cpp::make_field(kTarget, std::vector<float>(y, y + nt), {static_cast<int64_t>(nt)});
      }
    } catch (...) {
      tp::cpp::release_fields(made, n);
      throw;
    }
    std::memcpy(out_fields, made, sizeof(made));
    *out_count = 2;
    return TP_OK;
  });
}

const tp_dataset_v1_t kDatasetTable = {
    sizeof(tp_dataset_v1_t), &csv_create, &csv_destroy, &csv_size, &csv_get_sample, /*set_epoch=*/nullptr,
};

const tp::cpp::Component kComponents[] = {
    {&kDescriptor, TP_IFACE_DATASET_V1, &kDatasetTable},
};

}  // namespace

TP_DEFINE_PLUGIN("csv", TP_STABLE_BUILD_INFO_INIT, kComponents)
