#include "tp/framework/plugin/batch_transform_proxy.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "tp/framework/plugin/plugin_crash.h"

#include "config_adapter.h"
#include "sized_copy.h"
#include "tensor_handles.h"

namespace tp {
namespace {
// Upper bound on the fields one call replaces; a batch has a handful, and more fails clearly.
constexpr uint32_t kMaxTransformOutputs = 64;
}  // namespace

BatchTransformProxy::BatchTransformProxy(ComponentEntry entry, const ComponentConfig& config)
    : PluginInstance(std::move(entry)), table_(detail::sized_copy<tp_batch_transform_v1_t>(info_->interface_table)) {
  auto view = detail::make_config_view(config);
  const tp_status status =
      in_plugin_call(id().c_str(), "create", [&] { return table_.create(library_->host(), view->view(), &self_); });
  check_create(status, self_);
}

BatchTransformProxy::~BatchTransformProxy() { in_plugin_call(id().c_str(), "destroy", [&] { table_.destroy(self_); }); }

NamedTensors BatchTransformProxy::apply(uint64_t seed, NamedTensors batch) {
  std::array<tp_named_tensor_t, kMaxTransformOutputs> outputs{};  // zeroed: a slot left NULL holds nothing
  uint32_t count = 0;
  tp_status status = TP_OK;
  {
    const auto views = detail::borrow_all(batch);
    const PluginCallScope crash_scope(id().c_str(), "apply", UINT64_MAX);  // plugin/plugin_crash.h
    status = table_.apply(self_, seed, views.data(), static_cast<uint32_t>(views.size()), outputs.data(), kMaxTransformOutputs,
                          &count);
  }
  // Every handle the plugin wrote is ours from here, whatever the status (PLG-9, "outputs of a
  // failed call"): adopt them all before any exit below.
  std::array<at::Tensor, kMaxTransformOutputs> adopted;
  for (uint32_t i = 0; i < kMaxTransformOutputs; ++i)
    if (outputs[i].tensor != nullptr) adopted[i] = detail::adopt(std::exchange(outputs[i].tensor, nullptr));
  check(status, "apply");
  if (count > kMaxTransformOutputs)
    check(TP_ERR_INTERNAL, "apply",
          "a call that reported " + std::to_string(count) + " outputs for a capacity of " + std::to_string(kMaxTransformOutputs));
  for (uint32_t i = 0; i < count; ++i) {
    if (!adopted[i].defined() || outputs[i].name == nullptr)
      check(TP_ERR_INTERNAL, "apply", "a call that returned TP_OK with output " + std::to_string(i) + " of " +
                                          std::to_string(count) + " NULL or unnamed");
    const std::string name = outputs[i].name;
    auto same = std::find_if(batch.begin(), batch.end(), [&](const auto& field) { return field.first == name; });
    if (same != batch.end()) same->second = std::move(adopted[i]);
    else batch.emplace_back(name, std::move(adopted[i]));
  }
  return batch;
}

}  // namespace tp
