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

  /// True when the plugin implements set_activation_checkpointing (a tp.model/1 table of ABI
  /// 1.1 or later with the entry non-NULL). The instance may still refuse (see below).
  bool supports_activation_checkpointing() const;
  /// Switches activation checkpointing of the model's declared blocks (`[model]
  /// activation_checkpointing`). Call after to_device and before the first training step. When
  /// on, training-mode forward keeps only the declared blocks' inputs and backward recomputes
  /// them: outputs and gradients are unchanged, activation memory falls, a step costs about one
  /// more forward pass.
  ///
  /// Throws tp::ConfigError with key path "model.activation_checkpointing", naming the component,
  /// when `enabled` is true and the plugin cannot do it: no entry (built for ABI 1.0, or NULL), or
  /// the instance returned TP_ERR_UNSUPPORTED (its message is included). Any other failure is a
  /// PluginError. Switching off a model without the entry does nothing.
  ///
  /// Example:
  ///   model.to_device(device);
  ///   if (config.activation_checkpointing) model.set_activation_checkpointing(true);
  void set_activation_checkpointing(bool enabled);

 private:
  tp_model_v1_t table_{};
  uint32_t table_size_ = 0; ///< the plugin's struct_size: which ABI minor's table it wrote
  void* self_ = nullptr;
};

}  // namespace tp
