#include "tp/framework/plugin/metric_proxy.h"

#include "tp/framework/plugin/plugin_crash.h"

#include <string>
#include <unordered_set>
#include <vector>

#include "config_adapter.h"
#include "sized_copy.h"
#include "state_visit.h"
#include "tensor_handles.h"

namespace tp {

MetricProxy::MetricProxy(ComponentEntry entry, const ComponentConfig& config)
    : PluginInstance(std::move(entry)), table_(detail::sized_copy<tp_metric_v1_t>(info_->interface_table)) {
  auto view = detail::make_config_view(config);
  const tp_status status =
      in_plugin_call(id().c_str(), "create", [&] { return table_.create(library_->host(), view->view(), &self_); });
  check_create(status, self_);
}

MetricProxy::~MetricProxy() { in_plugin_call(id().c_str(), "destroy", [&] { table_.destroy(self_); }); }

void MetricProxy::to_device(const c10::Device& device) {
  check(table_.to_device(self_, detail::to_tp_device(device), device.has_index() ? device.index() : 0), "to_device");
}

void MetricProxy::reset() { check(table_.reset(self_), "reset"); }

void MetricProxy::update(const NamedTensors& outputs, const NamedTensors& targets) {
  const auto output_views = detail::borrow_all(outputs);
  const auto target_views = detail::borrow_all(targets);
  tp_status status = TP_OK;
  {
    const PluginCallScope crash_scope(id().c_str(), "update", UINT64_MAX, UINT64_MAX, library_->path().c_str());  // plugin/plugin_crash.h
    status = table_.update(self_, output_views.data(), static_cast<uint32_t>(output_views.size()), target_views.data(),
                           static_cast<uint32_t>(target_views.size()));
  }
  check(status, "update");
}

std::vector<StateTensor> MetricProxy::state() const {
  std::vector<StateTensor> out;
  check(table_.visit_state(self_, &detail::collect_state_entry, &out), "visit_state");
  return out;
}

std::vector<StateTensor> MetricProxy::gathered_state() const {
  std::vector<StateTensor> out;
  if (table_.visit_gathered_state == nullptr) return out;  // NULL, or a table from before ABI 1.7
  check(table_.visit_gathered_state(self_, &detail::collect_state_entry, &out), "visit_gathered_state");
  return out;
}

std::vector<std::pair<std::string, double>> MetricProxy::compute() {
  // TP_METRIC_VALUE_CAPACITY's room (iface/metric.h): one value per class for thousands of classes.
  std::vector<tp_scalar_t> values(TP_METRIC_VALUE_CAPACITY);
  uint32_t count = 0;
  tp_status status = TP_OK;
  {
    const PluginCallScope crash_scope(id().c_str(), "compute", UINT64_MAX);
    status = table_.compute(self_, values.data(), TP_METRIC_VALUE_CAPACITY, &count);
  }
  check(status, "compute");
  const auto refuse = [&](const std::string& what) {
    throw PluginError(id(), "compute",
                      "plugin component '" + id() + "' (" + library_->path().filename().string() + ") " + what + ".");
  };
  if (count > TP_METRIC_VALUE_CAPACITY)
    refuse("reported " + std::to_string(count) + " values for a capacity of " + std::to_string(TP_METRIC_VALUE_CAPACITY) +
           ": report at most that many");
  std::vector<std::pair<std::string, double>> out;
  std::unordered_set<std::string> seen;
  for (uint32_t i = 0; i < count; ++i) {
    std::string name = values[i].name != nullptr ? values[i].name : "";
    // Values are logged, monitored and plotted by name: a second value of a name would silently
    // replace the first in history and hide it from checkpoint selection.
    if (!seen.insert(name).second)
      refuse("reported two values named '" + name + "': each value needs its own name; rename one in the plugin");
    out.emplace_back(std::move(name), values[i].value);
  }
  return out;
}

}  // namespace tp
