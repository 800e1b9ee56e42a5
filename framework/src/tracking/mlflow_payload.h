// What a run sends to MLflow, as request bodies, built without a server: the config's scalars as
// params, tags, every history value as a metric at its step, split into runs/log-batch requests
// within the API's limits. Pure functions (tests/unit/tracking/mlflow_payload_test.cpp).
//
// MLflow's limits (mlflow/utils/validation.py, MLflow 2.x and 3.x): a log-batch request holds at
// most 1000 metrics, 100 params and 100 tags, 1000 entries in all; a param value at most 6000
// characters, a tag value 8000, a key 250. Longer values are cut (and the cut ones listed), longer
// keys left out (and listed): a config has neither unless a plugin's key holds a long text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "tp/framework/monitor/history.h"

namespace tp::mlflow {

inline constexpr size_t kMaxMetricsPerBatch = 1000;
inline constexpr size_t kMaxParamsPerBatch = 100;
inline constexpr size_t kMaxTagsPerBatch = 100;
inline constexpr size_t kMaxEntriesPerBatch = 1000;
inline constexpr size_t kMaxParamValue = 6000;
inline constexpr size_t kMaxTagValue = 8000;
inline constexpr size_t kMaxKey = 250;

struct KeyValue {
  std::string key, value;
  bool operator==(const KeyValue&) const = default;
};

struct Metric {
  std::string key;
  double value; ///< NaN and infinities are sent as MLflow's "NaN", "Infinity", "-Infinity"
  int64_t step;
  int64_t timestamp_ms;
};

/// Params or tags with what had to be shortened or left out.
struct Entries {
  std::vector<KeyValue> entries;
  std::vector<std::string> cut;     ///< keys whose value was cut to the limit
  std::vector<std::string> dropped; ///< keys longer than kMaxKey, left out
};

/// `name` as MLflow accepts a key (alphanumerics, '_', '-', '.', ' ', ':', '/'): an index
/// "[0]" becomes ".0" ("metrics[0].top_k" -> "metrics.0.top_k"), any other character '_'.
std::string mlflow_key(std::string_view name);

/// Every leaf of `config` as a param, as `host compare` names them (flatten_config) made MLflow
/// keys: "train.batch_size", "metrics.0.component" in an array of tables; a string's value without
/// its quotes ("bf16"), any other as a TOML literal ("3e-04", "1.0", "[0.9, 0.95]", "[\"a=b\"]"). Values longer than kMaxParamValue are cut. Sorted by key.
Entries params_from_config(const toml::table& config);
/// Every scalar of `table` as a tag "<prefix><key>" (runtime.toml's provenance: versions, git,
/// plugin hashes), cut at kMaxTagValue.
Entries tags_from_table(const toml::table& table, const std::string& prefix);
/// runtime.toml's tags: tags_from_table(runtime, "torchhost.") but for a resumed run's
/// [[provenance.earlier]] (its earlier processes, up to 64 of them, each with its plugins: hundreds
/// of tags), which is one tag, torchhost.provenance.earlier_count; runtime.toml, sent as an
/// artifact, keeps the list whole.
Entries runtime_tags_from_table(toml::table runtime);
/// The "key=value" entries of logging.mlflow.tags. Throws ConfigError naming logging.mlflow.tags
/// for an entry without '=' or with an empty key.
std::vector<KeyValue> user_tags(const std::vector<std::string>& entries);

/// The metrics of one history record: its values at its "step" (the record's own x axis, not a
/// metric), named as the TensorBoard writer names them: a "step" record's under their own names,
/// any other kind's under <kind>/<name> (epoch/val/accuracy). A record without a step gives none.
std::vector<Metric> metrics_from_record(const HistoryRecord& record, int64_t timestamp_ms);

/// runs/log-batch bodies for `run_id` holding every metric, param and tag given, in order, each
/// within the limits above.
std::vector<std::string> log_batch_bodies(const std::string& run_id, const std::vector<Metric>& metrics,
                                          const std::vector<KeyValue>& params, const std::vector<KeyValue>& tags);

}  // namespace tp::mlflow
