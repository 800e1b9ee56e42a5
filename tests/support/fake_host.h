// Test support: a minimal tp_host_t and tp_config_t for driving a plugin through its C ABI
// without the framework (unit tests of single plugins). The real host lives in tp::framework.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "tp/config.h"
#include "tp/entry.h"
#include "tp/host.h"

namespace tp::test {

/// Records the last fail() message; log() lines are kept in `logs`, their TP_LOG_* severities in
/// `log_levels` (same index).
struct FakeHost {
  tp_host_t host{};
  std::string last_error;
  std::vector<std::string> logs;
  std::vector<int32_t> log_levels;

  FakeHost() {
    host.struct_size = sizeof(tp_host_t);
    host.abi = TP_ABI_VERSION_INIT;
    host.host_data = this;
    host.fail = [](const tp_host_t* h, tp_status code, const char* msg) {
      static_cast<FakeHost*>(h->host_data)->last_error = msg != nullptr ? msg : "";
      return code;
    };
    host.log = [](const tp_host_t* h, int32_t level, const char* msg) {
      static_cast<FakeHost*>(h->host_data)->logs.emplace_back(msg != nullptr ? msg : "");
      static_cast<FakeHost*>(h->host_data)->log_levels.push_back(level);
    };
    host.get_service = [](const tp_host_t*, const char*) -> const void* { return nullptr; };
    host.tensor_release = nullptr; // Tier T tests install their own
  }
};

/// A config view over a map of values. Keys missing from the map fail with TP_ERR_CONFIG,
/// exactly as the real host does for undeclared keys.
struct FakeConfig {
  using Value = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                             std::vector<double>, std::vector<std::string>>;
  std::map<std::string, Value> values;
  tp_config_t view{};

  FakeConfig() {
    view.struct_size = sizeof(tp_config_t);
    view.self = this;
    view.get_bool = [](const void* s, const char* k, bool* out) { return get<bool>(s, k, out); };
    view.get_int = [](const void* s, const char* k, int64_t* out) { return get<int64_t>(s, k, out); };
    view.get_float = [](const void* s, const char* k, double* out) {
      const auto* self = static_cast<const FakeConfig*>(s);
      auto it = self->values.find(k);
      if (it == self->values.end()) return tp_status{TP_ERR_CONFIG};
      if (const auto* i = std::get_if<int64_t>(&it->second)) { *out = static_cast<double>(*i); return tp_status{TP_OK}; }
      return get<double>(s, k, out);
    };
    view.get_string = [](const void* s, const char* k, const char** out) {
      const auto* self = static_cast<const FakeConfig*>(s);
      auto it = self->values.find(k);
      if (it == self->values.end() || !std::holds_alternative<std::string>(it->second)) return tp_status{TP_ERR_CONFIG};
      *out = std::get<std::string>(it->second).c_str();
      return tp_status{TP_OK};
    };
    view.get_array_size = [](const void* s, const char* k, uint32_t* out) {
      const auto* self = static_cast<const FakeConfig*>(s);
      auto it = self->values.find(k);
      if (it == self->values.end()) return tp_status{TP_ERR_CONFIG};
      return std::visit([out](const auto& v) -> tp_status {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<double>> ||
                      std::is_same_v<T, std::vector<std::string>>) {
          *out = static_cast<uint32_t>(v.size());
          return TP_OK;
        } else {
          return TP_ERR_CONFIG;
        }
      }, it->second);
    };
    view.get_int_at = [](const void* s, const char* k, uint32_t i, int64_t* out) { return at<int64_t>(s, k, i, out); };
    view.get_float_at = [](const void* s, const char* k, uint32_t i, double* out) { return at<double>(s, k, i, out); };
    view.get_string_at = [](const void* s, const char* k, uint32_t i, const char** out) {
      const auto* self = static_cast<const FakeConfig*>(s);
      auto it = self->values.find(k);
      if (it == self->values.end()) return tp_status{TP_ERR_CONFIG};
      const auto* v = std::get_if<std::vector<std::string>>(&it->second);
      if (v == nullptr || i >= v->size()) return tp_status{TP_ERR_CONFIG};
      *out = (*v)[i].c_str();
      return tp_status{TP_OK};
    };
  }
  FakeConfig(const FakeConfig&) = delete;
  FakeConfig& operator=(const FakeConfig&) = delete;

 private:
  template <typename T>
  static tp_status get(const void* s, const char* k, T* out) {
    const auto* self = static_cast<const FakeConfig*>(s);
    auto it = self->values.find(k);
    if (it == self->values.end() || !std::holds_alternative<T>(it->second)) return TP_ERR_CONFIG;
    *out = std::get<T>(it->second);
    return TP_OK;
  }
  template <typename T>
  static tp_status at(const void* s, const char* k, uint32_t i, T* out) {
    const auto* self = static_cast<const FakeConfig*>(s);
    auto it = self->values.find(k);
    if (it == self->values.end()) return TP_ERR_CONFIG;
    const auto* v = std::get_if<std::vector<T>>(&it->second);
    if (v == nullptr || i >= v->size()) return TP_ERR_CONFIG;
    *out = (*v)[i];
    return TP_OK;
  }
};

}  // namespace tp::test
