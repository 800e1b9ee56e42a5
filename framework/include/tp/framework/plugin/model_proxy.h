// Host-side handle of a model component ("tp.model/1").
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "tp/framework/config/run_config.h"
#include "tp/framework/data/sample_source.h"
#include "tp/framework/plugin/plugin_instance.h"
#include "tp/iface/model.h"

namespace tp {

class ModelProxy : public PluginInstance {
 public:
  /// Creates the model from `config` (options already validated against the schema).
  ModelProxy(ComponentEntry entry, const ComponentConfig& config);
  ~ModelProxy();
  /// Moves the model; floating state becomes `dtype`. Invalidates earlier state() results.
  void to_device(const c10::Device& device, c10::ScalarType dtype = c10::kFloat);
  void set_training(bool training);
  /// Parameters then buffers as the plugin visits them (stable order, unique names).
  std::vector<StateTensor> state() const;
  /// Runs forward on all batch fields; returns the named outputs. Grad mode / autocast are the
  /// caller's (the trainer sets them).
  NamedTensors forward(const NamedTensors& inputs);

 private:
  tp_model_v1_t table_{};
  void* self_ = nullptr;
};

}  // namespace tp
