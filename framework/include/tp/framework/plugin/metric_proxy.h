// Host-side handle of a metric component ("tp.metric/1").
#pragma once

#include <c10/core/Device.h>

#include <utility>

#include "tp/framework/config/run_config.h"
#include "tp/framework/data/sample_source.h"
#include "tp/framework/plugin/plugin_instance.h"
#include "tp/iface/metric.h"

namespace tp {

class MetricProxy : public PluginInstance {
 public:
  MetricProxy(ComponentEntry entry, const ComponentConfig& config);
  ~MetricProxy();
  void to_device(const c10::Device& device);
  void reset();
  /// Adds one batch (no device sync).
  void update(const NamedTensors& outputs, const NamedTensors& targets);
  /// The state tensors (aliases), summed across ranks by the caller before compute().
  std::vector<StateTensor> state() const;
  /// The state tensors concatenated across ranks (aliases, ABI 1.7): the caller gathers every
  /// rank's rows into them in place (at::Tensor::set_) before compute(). Empty for a metric without
  /// visit_gathered_state.
  std::vector<StateTensor> gathered_state() const;
  /// Named values ("accuracy"); may sync the device.
  std::vector<std::pair<std::string, double>> compute();

 private:
  tp_metric_v1_t table_{};
  void* self_ = nullptr;
};

}  // namespace tp
