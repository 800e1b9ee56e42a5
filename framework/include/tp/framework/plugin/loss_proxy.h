// Host-side handle of a loss component ("tp.loss/1").
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tp/framework/config/run_config.h"
#include "tp/framework/data/field_contracts.h"
#include "tp/framework/data/sample_source.h"
#include "tp/framework/plugin/plugin_instance.h"
#include "tp/iface/loss.h"

namespace tp {

/// The sum of per-item losses (differentiable) and the number of items (0-dim, no grad), and the
/// loss's named terms (tp_loss_v1_t::terms, ABI 1.3; empty for most losses): detached 0-dim sums
/// over the same items that add up to `sum`.
struct LossTerms {
  at::Tensor sum;
  at::Tensor count;
  std::vector<std::pair<std::string, at::Tensor>> terms;
};

class LossProxy : public PluginInstance {
 public:
  LossProxy(ComponentEntry entry, const ComponentConfig& config);
  ~LossProxy();
  /// `outputs` from the model, `targets` the batch's fields.
  LossTerms forward(const NamedTensors& outputs, const NamedTensors& targets);
  /// What the loss declared about itself (tp_loss_v1_t::describe, ABI 1.9), read once at
  /// creation: its target fields' contracts and its floored terms; empty for most losses.
  const LossDescription& description() const noexcept { return description_; }

 private:
  /// Calls describe (when the table has it) and copies the description out; a malformed one (an
  /// unknown contract kind, a NULL name) fails naming the loss.
  LossDescription read_description();

  /// The named terms of the forward just made (empty when the loss has none).
  std::vector<std::pair<std::string, at::Tensor>> terms();

  tp_loss_v1_t table_{};
  void* self_ = nullptr;
  LossDescription description_;
};

}  // namespace tp
