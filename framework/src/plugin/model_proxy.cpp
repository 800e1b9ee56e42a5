#include "tp/framework/plugin/model_proxy.h"

#include <array>

#include "config_adapter.h"
#include "sized_copy.h"
#include "state_visit.h"
#include "tensor_handles.h"

namespace tp {
namespace {
// Upper bound on a model's outputs per call; generous, and a plugin that has more fails clearly.
constexpr uint32_t kMaxOutputs = 64;
}  // namespace

ModelProxy::ModelProxy(ComponentEntry entry, const ComponentConfig& config)
    : PluginInstance(std::move(entry)), table_(detail::sized_copy<tp_model_v1_t>(info_->interface_table)) {
  auto view = detail::make_config_view(config);
  check(table_.create(library_->host(), view->view(), &self_), "create");
}

ModelProxy::~ModelProxy() { table_.destroy(self_); }

void ModelProxy::to_device(const c10::Device& device, c10::ScalarType dtype) {
  check(table_.to_device(self_, detail::to_tp_device(device), device.has_index() ? device.index() : 0,
                         detail::to_tp_dtype(dtype)),
        "to_device");
}

void ModelProxy::set_training(bool training) { check(table_.set_training(self_, training), "set_training"); }

std::vector<StateTensor> ModelProxy::state() const {
  std::vector<StateTensor> out;
  check(table_.visit_state(self_, &detail::collect_state_entry, &out), "visit_state");
  return out;
}

NamedTensors ModelProxy::forward(const NamedTensors& inputs) {
  const auto views = detail::borrow_all(inputs);
  std::array<tp_named_tensor_t, kMaxOutputs> outputs{};
  uint32_t count = 0;
  check(table_.forward(self_, views.data(), static_cast<uint32_t>(views.size()), outputs.data(), kMaxOutputs, &count),
        "forward");
  NamedTensors result;
  result.reserve(count);
  for (uint32_t i = 0; i < count && i < kMaxOutputs; ++i)
    result.emplace_back(outputs[i].name != nullptr ? outputs[i].name : "", detail::adopt(outputs[i].tensor));
  return result;
}

}  // namespace tp
