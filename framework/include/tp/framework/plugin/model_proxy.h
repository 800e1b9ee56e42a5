// Host-side handle of a model component ("tp.model/1").
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

  /// The model's depth ordering (tp_model_v1_t.layer_depths, ABI 1.4) for optim.layer_decay:
  /// prefixes and depths, copied. Throws tp::ConfigError with key path "optim.layer_decay",
  /// naming the component, when the plugin has no entry (built for ABI < 1.4, or NULL) or the
  /// instance returned TP_ERR_UNSUPPORTED; PluginError for a NULL or empty prefix, a prefix
  /// given twice, or any other failure.
  std::vector<std::pair<std::string, uint32_t>> layer_depths() const;
  /// `[model] freeze_bn_stats`: keeps the model's BatchNorm layers in eval mode while it trains
  /// (tp_model_v1_t.set_batchnorm_frozen, ABI 1.4). Call after to_device. Throws tp::ConfigError
  /// with key path "model.freeze_bn_stats", naming the component, when `frozen` is true and the
  /// plugin has no entry or the instance has no BatchNorm layer; switching off a model without
  /// the entry does nothing.
  void set_batchnorm_frozen(bool frozen);
  /// A param-group rule's `freeze_bn_stats` (tp_model_v1_t.set_batchnorm_frozen_at, ABI 1.14):
  /// keeps the BatchNorm layers `names` (dotted module names, "teacher.bn1") in eval mode while
  /// the model trains. Call after to_device. Throws tp::ConfigError with key path `key`, naming the
  /// component, when the plugin has no entry or refuses a name (its message included).
  void set_batchnorm_frozen_at(const std::vector<std::string>& names, const std::string& key);

  /// Why the model's training step cannot be captured in a CUDA graph, for `run.cuda_graphs`
  /// (tp_model_v1_t.check_graph_capture, ABI 1.8): "" when the model can be captured
  /// (check_graph_capture is NULL, missing from an older plugin's table, or returned TP_OK);
  /// otherwise the plugin's reason, one sentence such as "reads the number of boxes on the host"
  /// ("(the plugin gave no message)" when it answered TP_ERR_UNSUPPORTED without one). Call once
  /// before training, after to_device and set_activation_checkpointing (the switch may change
  /// what the forward does). Throws PluginError when the plugin fails with any other status. [main]
  ///
  /// Example:
  ///   const std::string blocker = model.graph_capture_blocker();
  ///   if (!blocker.empty() && cuda_graphs == "on")
  ///     throw ConfigError("run.cuda_graphs", "... '" + model.id() + "' cannot be captured: " + blocker);
  std::string graph_capture_blocker();

  /// Whether the plugin has the per-step hook (tp_model_v1_t.after_optimizer_step, ABI 1.14):
  /// false for a NULL entry or a table from before 1.14 (its struct_size ends before the member).
  bool has_after_optimizer_step() const;
  /// [main] The per-step hook: tells the model that optimizer step `step` (1-based, the count
  /// checkpoints record) of the run's planned `total_steps` is done, under a no-grad guard and
  /// outside autocast, so it may update lent frozen state (a momentum teacher) in place. Does
  /// nothing when the plugin has no hook. The training step calls it once per optimizer step
  /// (ParameterUpdate::advance), eagerly also under run.cuda_graphs. Throws PluginError naming the
  /// function and the step when the plugin fails.
  ///
  /// Example:
  ///   update.set_after_step([&](int64_t step) { model.after_optimizer_step(step, total); });
  void after_optimizer_step(int64_t step, int64_t total_steps);

 private:
  tp_model_v1_t table_{};
  uint32_t table_size_ = 0; ///< the plugin's struct_size: which ABI minor's table it wrote
  void* self_ = nullptr;
  std::optional<c10::Device> device_; ///< where to_device put the model; its outputs must be there

  /// Throws the PluginError (function "forward") for outputs the host refuses: "plugin component
  /// '<id>' (<file>) <what>." (`what` says what it returned and what to change).
  [[noreturn]] void refuse_forward(const std::string& what) const;
  /// "the model component 'id' (file.so, plugin ABI M.N)", for configuration errors.
  std::string who() const;
  /// The ConfigError for `key` when the optional entry `member` (at `offset`, added in ABI
  /// `minor`) is absent: "does not support <feature>", whether the table predates that minor or
  /// leaves it NULL, and `what_to_do`.
  [[noreturn]] void throw_missing_entry(const std::string& key, const std::string& feature, const char* member,
                                        std::size_t offset, const char* minor, const std::string& what_to_do) const;
  /// The ConfigError for `key` when the instance answered TP_ERR_UNSUPPORTED: "refused <feature>:
  /// <its message>", then `what_to_do`.
  [[noreturn]] void throw_refused(const std::string& key, const std::string& feature,
                                  const std::string& what_to_do) const;
};

}  // namespace tp
