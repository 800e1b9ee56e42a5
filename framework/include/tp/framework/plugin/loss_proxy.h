// Host-side handle of a loss component ("tp.loss/1").
#pragma once

#include "tp/framework/config/run_config.h"
#include "tp/framework/data/sample_source.h"
#include "tp/framework/plugin/plugin_instance.h"
#include "tp/iface/loss.h"

namespace tp {

/// The sum of per-item losses (differentiable) and the number of items (0-dim, no grad).
struct LossTerms {
  at::Tensor sum;
  at::Tensor count;
};

class LossProxy : public PluginInstance {
 public:
  LossProxy(ComponentEntry entry, const ComponentConfig& config);
  ~LossProxy();
  /// `outputs` from the model, `targets` the batch's fields.
  LossTerms forward(const NamedTensors& outputs, const NamedTensors& targets);

 private:
  tp_loss_v1_t table_{};
  void* self_ = nullptr;
};

}  // namespace tp
