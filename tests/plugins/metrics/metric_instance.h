// A basic_metrics component driven through its C ABI, for the metric tests.
#pragma once

#include <vector>

#include "support/plugin_harness.h"

namespace tp::test {

/// A metric instance with the descriptor's defaults plus `overrides`; destroyed at scope end.
struct Metric {
  LoadedPlugin& p = plugin("basic_metrics");
  const tp_metric_v1_t* t = nullptr;
  void* self = nullptr;

  explicit Metric(const char* id, std::map<std::string, FakeConfig::Value> overrides = {}) {
    t = &p.table<tp_metric_v1_t>(id, TP_IFACE_METRIC_V1);
    FakeConfig cfg;
    fill_defaults(cfg, p.descriptor(id));
    for (auto& [k, v] : overrides) cfg.values[k] = v;
    REQUIRE_MESSAGE(t->create(&p.host.host, &cfg.view, &self) == TP_OK, p.host.last_error);
    REQUIRE(t->to_device(self, TP_DEVICE_CPU, 0) == TP_OK);
  }
  ~Metric() { t->destroy(self); }
  Metric(const Metric&) = delete;
  Metric& operator=(const Metric&) = delete;

  void update(Fields& outputs, Fields& targets) {
    REQUIRE_MESSAGE(t->update(self, outputs.view(), outputs.size(), targets.view(), targets.size()) == TP_OK,
                    p.host.last_error);
  }
  /// The values, read with the host's capacity (MetricProxy: TP_METRIC_VALUE_CAPACITY).
  std::map<std::string, double> compute() {
    std::vector<tp_scalar_t> values(TP_METRIC_VALUE_CAPACITY);
    uint32_t n = 0;
    REQUIRE_MESSAGE(t->compute(self, values.data(), TP_METRIC_VALUE_CAPACITY, &n) == TP_OK, p.host.last_error);
    std::map<std::string, double> out;
    for (uint32_t i = 0; i < n; ++i) out[values[i].name] = values[i].value;
    return out;
  }
  /// The state tensors, copied, in visit order.
  std::vector<at::Tensor> state() {
    std::vector<at::Tensor> out;
    for (const auto& e : visit_all(t->visit_state, self)) {
      CHECK(e.is_buffer);
      const at::Tensor& s = tensor_of(e.handle);
      CHECK((s.scalar_type() == at::kLong || s.scalar_type() == at::kDouble));
      out.push_back(s.clone());
    }
    return out;
  }
};

/// Whether two lists of state tensors are equal element for element.
inline bool equal_states(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!at::equal(a[i], b[i])) return false;
  return true;
}

}  // namespace tp::test
