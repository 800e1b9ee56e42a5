#include "tp/framework/plugin/loss_proxy.h"

#include "tp/framework/plugin/plugin_crash.h"

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "config_adapter.h"
#include "sized_copy.h"
#include "tensor_handles.h"

namespace tp {

LossProxy::LossProxy(ComponentEntry entry, const ComponentConfig& config)
    : PluginInstance(std::move(entry)), table_(detail::sized_copy<tp_loss_v1_t>(info_->interface_table)) {
  auto view = detail::make_config_view(config);
  const tp_status status =
      in_plugin_call(id().c_str(), "create", [&] { return table_.create(library_->host(), view->view(), &self_); });
  check_create(status, self_);
  try {
    description_ = read_description();
  } catch (...) {
    in_plugin_call(id().c_str(), "destroy", [&] { table_.destroy(self_); }); // the destructor does not run for a constructor that throws
    throw;
  }
}

LossDescription LossProxy::read_description() {
  // Optional, appended in ABI 1.9: sized_copy left it NULL for an older table.
  if (table_.describe == nullptr) return {};
  const tp_loss_description_t* described = nullptr;
  check(table_.describe(self_, &described), "describe");
  if (described == nullptr) return {};
  const auto plain = detail::sized_copy<tp_loss_description_t>(described);
  LossDescription out;
  // A producer built for a later minor may have grown the element: step by its struct_size (PLG-2).
  const auto* element = reinterpret_cast<const unsigned char*>(plain.contracts);
  const uint32_t stride = plain.contract_count > 0 ? detail::struct_size_of(element) : 0;
  if (plain.contract_count > 0 && stride < offsetof(tp_field_contract_t, class_count) + sizeof(int64_t))
    check(TP_ERR_INTERNAL, "describe", "the contracts' struct_size is " + std::to_string(stride) + ", smaller than ABI 1.9's " +
                                           std::to_string(sizeof(tp_field_contract_t)));
  for (uint32_t i = 0; i < plain.contract_count; ++i) {
    const auto contract = detail::sized_copy<tp_field_contract_t>(element + static_cast<size_t>(i) * stride);
    if (contract.field == nullptr || (contract.kind != TP_CONTRACT_BOXES_XYXY && contract.kind != TP_CONTRACT_CLASS_IDS))
      check(TP_ERR_INTERNAL, "describe",
            "contract " + std::to_string(i) + " has no field name or an unknown kind " + std::to_string(contract.kind) +
                " (tp/iface/loss.h lists TP_CONTRACT_BOXES_XYXY and TP_CONTRACT_CLASS_IDS)");
    out.contracts.push_back({contract.kind == TP_CONTRACT_BOXES_XYXY ? FieldContract::Kind::kBoxesXyxy
                                                                     : FieldContract::Kind::kClassIds,
                             contract.field, contract.class_count});
  }
  for (uint32_t i = 0; i < plain.floored_term_count; ++i) {
    if (plain.floored_terms[i] == nullptr)
      check(TP_ERR_INTERNAL, "describe", "floored term " + std::to_string(i) + " has no name");
    out.floored_terms.emplace_back(plain.floored_terms[i]);
  }
  if (!(plain.overfit_fraction >= 0.0 && plain.overfit_fraction < 1.0))
    check(TP_ERR_INTERNAL, "describe",
          "overfit_fraction is " + std::to_string(plain.overfit_fraction) + "; it must lie in [0, 1) (0: the host's)");
  out.overfit_fraction = plain.overfit_fraction;
  return out;
}

LossProxy::~LossProxy() { in_plugin_call(id().c_str(), "destroy", [&] { table_.destroy(self_); }); }

LossTerms LossProxy::forward(const NamedTensors& outputs, const NamedTensors& targets) {
  const auto output_views = detail::borrow_all(outputs);
  const auto target_views = detail::borrow_all(targets);
  tp_tensor sum = nullptr;
  tp_tensor count = nullptr;
  tp_status status = TP_OK;
  {
    const PluginCallScope crash_scope(id().c_str(), "forward", UINT64_MAX, UINT64_MAX, library_->path().c_str());  // plugin/plugin_crash.h
    status = table_.forward(self_, output_views.data(), static_cast<uint32_t>(output_views.size()), target_views.data(),
                            static_cast<uint32_t>(target_views.size()), &sum, &count);
  }
  // Both handles are ours from here, whatever the status (PLG-9, "outputs of a failed call").
  at::Tensor owned_sum = sum != nullptr ? detail::adopt(sum) : at::Tensor();
  at::Tensor owned_count = count != nullptr ? detail::adopt(count) : at::Tensor();
  check(status, "forward");
  if (!owned_sum.defined() || !owned_count.defined())
    check(TP_ERR_INTERNAL, "forward", "a call that returned TP_OK without both the loss sum and the item count");
  return {std::move(owned_sum), std::move(owned_count), terms()};
}

std::vector<std::pair<std::string, at::Tensor>> LossProxy::terms() {
  // Optional, appended in ABI 1.3: sized_copy left it NULL for an older table.
  if (table_.terms == nullptr) return {};
  constexpr uint32_t kCapacity = 32;
  tp_named_tensor_t slots[kCapacity] = {};
  uint32_t count = 0;
  tp_status status = TP_OK;
  {
    const PluginCallScope crash_scope(id().c_str(), "terms", UINT64_MAX);
    status = table_.terms(self_, slots, kCapacity, &count);
  }
  // Every handle left in a slot is ours, whatever the status (PLG-9).
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& slot : slots)
    if (slot.tensor != nullptr) out.emplace_back(slot.name != nullptr ? slot.name : "", detail::adopt(slot.tensor));
  check(status, "terms");
  if (count > kCapacity || out.size() != count)
    check(TP_ERR_INTERNAL, "terms", "a call that reported " + std::to_string(count) + " terms but filled " +
                                        std::to_string(out.size()) + " of " + std::to_string(kCapacity) + " slots");
  for (const auto& [name, tensor] : out)
    if (name.empty() || tensor.dim() != 0)
      check(TP_ERR_INTERNAL, "terms", "a term must have a name and be a 0-dim tensor (got '" + name + "')");
  return out;
}

}  // namespace tp
