// Host-side handle of a batch transform component ("tp.batch_transform/1", plugin ABI 1.3).
#pragma once

#include <cstdint>

#include "tp/framework/config/run_config.h"
#include "tp/framework/data/sample_source.h"
#include "tp/framework/plugin/plugin_instance.h"
#include "tp/iface/batch_transform.h"

namespace tp {

class BatchTransformProxy : public PluginInstance {
 public:
  BatchTransformProxy(ComponentEntry entry, const ComponentConfig& config);
  ~BatchTransformProxy();
  /// [main] Transforms a training micro-batch already on the device: the fields the plugin
  /// returns replace the same-named fields of `batch` (or are appended when new); the others are
  /// kept. `seed` is the call's only randomness (batch_transform_seed() in the engine).
  /// Throws PluginError; every tensor the plugin handed over is released on every path (PLG-9).
  NamedTensors apply(uint64_t seed, NamedTensors batch);

 private:
  tp_batch_transform_v1_t table_{};
  void* self_ = nullptr;
};

}  // namespace tp
