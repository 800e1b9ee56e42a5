#include "tracking/mlflow_payload.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "tp/framework/config/flatten.h"
#include "tp/framework/error.h"

namespace tp::mlflow {
namespace {

void add_entry(Entries& out, std::string key, std::string value, size_t max_value) {
  key = mlflow_key(key);
  if (key.size() > kMaxKey) {
    out.dropped.push_back(std::move(key));
    return;
  }
  if (value.size() > max_value) {
    value.resize(max_value);
    out.cut.push_back(key);
  }
  out.entries.push_back({std::move(key), std::move(value)});
}

Entries flattened(const toml::table& table, const std::string& prefix, size_t max_value) {
  Entries out;
  // A string without its quotes, anything else as TOML writes it (an array keeps its strings' quotes).
  for (const auto& [key, value] : flatten_config(table))
    add_entry(out, prefix + key, value.type == toml::node_type::string ? value.display : value.literal, max_value);
  return out;
}

nlohmann::json metric_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

nlohmann::json key_values(const std::vector<KeyValue>& entries, size_t begin, size_t end) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = begin; i < end; ++i) out.push_back({{"key", entries[i].key}, {"value", entries[i].value}});
  return out;
}

}  // namespace

std::string mlflow_key(std::string_view name) {
  std::string key;
  for (const char ch : name) {
    const bool allowed = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                         ch == '_' || ch == '-' || ch == '.' || ch == ' ' || ch == ':' || ch == '/';
    if (ch == '[') key += '.';
    else if (ch == ']') continue;
    else key += allowed ? ch : '_';
  }
  return key;
}

Entries params_from_config(const toml::table& config) { return flattened(config, "", kMaxParamValue); }

Entries tags_from_table(const toml::table& table, const std::string& prefix) {
  return flattened(table, prefix, kMaxTagValue);
}

Entries runtime_tags_from_table(toml::table runtime) {
  if (toml::table* provenance = runtime["provenance"].as_table())
    if (const toml::array* earlier = provenance->get_as<toml::array>("earlier")) {
      const auto count = static_cast<int64_t>(earlier->size());
      provenance->erase("earlier");
      provenance->insert_or_assign("earlier_count", count);
    }
  return tags_from_table(runtime, "torchhost.");
}

std::vector<KeyValue> user_tags(const std::vector<std::string>& entries) {
  std::vector<KeyValue> out;
  for (const auto& entry : entries) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError("logging.mlflow.tags", "logging.mlflow.tags holds \"" + entry +
                                                   "\": each entry is \"key=value\" with a non-empty key "
                                                   "(tags = [\"team=vision\"]).");
    out.push_back({entry.substr(0, eq), entry.substr(eq + 1)});
  }
  return out;
}

std::vector<Metric> metrics_from_record(const HistoryRecord& record, int64_t timestamp_ms) {
  std::vector<Metric> out;
  const auto step = std::find_if(record.values.begin(), record.values.end(), [](const auto& v) { return v.first == "step"; });
  if (step == record.values.end() || !std::isfinite(step->second)) return out;
  const auto at = static_cast<int64_t>(step->second);
  for (const auto& [name, value] : record.values) {
    if (name == "step") continue;
    out.push_back({mlflow_key(record.kind == "step" ? name : record.kind + "/" + name), value, at, timestamp_ms});
  }
  return out;
}

std::vector<std::string> log_batch_bodies(const std::string& run_id, const std::vector<Metric>& metrics,
                                          const std::vector<KeyValue>& params, const std::vector<KeyValue>& tags) {
  std::vector<std::string> bodies;
  size_t m = 0, p = 0, t = 0;
  while (m < metrics.size() || p < params.size() || t < tags.size()) {
    const size_t p_end = std::min(params.size(), p + kMaxParamsPerBatch);
    const size_t t_end = std::min(tags.size(), t + kMaxTagsPerBatch);
    const size_t room = kMaxEntriesPerBatch - (p_end - p) - (t_end - t);
    const size_t m_end = std::min(metrics.size(), m + std::min(room, kMaxMetricsPerBatch));
    nlohmann::json body = {{"run_id", run_id}};
    nlohmann::json metric_list = nlohmann::json::array();
    for (size_t i = m; i < m_end; ++i)
      metric_list.push_back({{"key", metrics[i].key},
                             {"value", metric_value(metrics[i].value)},
                             {"timestamp", metrics[i].timestamp_ms},
                             {"step", metrics[i].step}});
    body["metrics"] = std::move(metric_list);
    body["params"] = key_values(params, p, p_end);
    body["tags"] = key_values(tags, t, t_end);
    bodies.push_back(body.dump());
    m = m_end;
    p = p_end;
    t = t_end;
  }
  return bodies;
}

}  // namespace tp::mlflow
