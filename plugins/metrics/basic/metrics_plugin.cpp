// basic_metrics: the tp_metric_v1_t glue every metric shares, and tp_entry.
#include <c10/util/StringUtil.h>

#include "metric.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/plugin.h"

namespace tp::metrics {

void require_input(bool ok, const char* component, const std::string& message) {
  if (!ok) throw tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT, std::string(component) + ": " + message);
}

double read_scalar(const at::Tensor& value) { return value.item<double>(); }

namespace {

using tp::cpp::Failure;
using tp::cpp::plugin_host;

Metric& as_metric(void* self) {
  if (self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "metric instance is NULL");
  return *static_cast<Metric*>(self);
}

template <MetricFactory kMake>
tp_status create(const tp_host_t* host, const tp_config_t* cfg, void** out_self) {
  TP_GUARD(plugin_host(), {
    if (out_self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "create: out_self is NULL");
    *out_self = nullptr;
    *out_self = kMake(tp::cpp::ConfigReader(cfg)).release();
    return TP_OK;
  });
}

void destroy(void* self) { delete static_cast<Metric*>(self); }

tp_status to_device(void* self, int32_t device_type, int32_t device_index) {
  TP_GUARD(plugin_host(), {
    at::Device device(at::kCPU);
    if (device_type == TP_DEVICE_CUDA)
      device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_index));
    else if (device_type != TP_DEVICE_CPU)
      throw Failure(TP_ERR_INVALID_ARGUMENT, "to_device: unknown device type " + std::to_string(device_type));
    // Replaces the member tensors; handles from visit_state point at the members, so they
    // stay valid and see the moved state.
    for (const StateSlot& slot : as_metric(self).state()) *slot.tensor = slot.tensor->to(device);
    return TP_OK;
  });
}

tp_status reset(void* self) {
  TP_GUARD(plugin_host(), {
    for (const StateSlot& slot : as_metric(self).state()) slot.tensor->zero_();
    return TP_OK;
  });
}

tp_status update(void* self, const tp_named_tensor_t* outputs, uint32_t output_count,
                 const tp_named_tensor_t* targets, uint32_t target_count) {
  TP_GUARD(plugin_host(), {
    as_metric(self).update(outputs, output_count, targets, target_count);
    return TP_OK;
  });
}

tp_status visit_state(void* self, tp_state_visitor visit, void* user) {
  TP_GUARD(plugin_host(), {
    if (visit == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "visit_state: visitor is NULL");
    for (const StateSlot& slot : as_metric(self).state()) {
      const tp_status status = visit(user, slot.name, tp::cpp::borrow_handle(*slot.tensor), true);
      if (status != TP_OK) return status;  // the visitor recorded its own message
    }
    return TP_OK;
  });
}

tp_status compute(void* self, tp_scalar_t* out_values, uint32_t capacity, uint32_t* out_count) {
  TP_GUARD(plugin_host(), {
    if (out_count == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "compute: out_count is NULL");
    *out_count = 0;
    const std::vector<tp_scalar_t> values = as_metric(self).compute();
    if (values.size() > capacity || out_values == nullptr)
      throw Failure(TP_ERR_INVALID_ARGUMENT, "compute: the metric has " + std::to_string(values.size()) +
                                                 " values but capacity is " + std::to_string(capacity));
    for (size_t i = 0; i < values.size(); ++i) out_values[i] = values[i];
    *out_count = static_cast<uint32_t>(values.size());
    return TP_OK;
  });
}

template <MetricFactory kMake>
constexpr tp_metric_v1_t metric_table() {
  return {sizeof(tp_metric_v1_t), &create<kMake>, &destroy,     &to_device,
          &reset,                 &update,        &visit_state, &compute};
}

const tp_metric_v1_t kAccuracyTable = metric_table<&make_accuracy>();
const tp_metric_v1_t kF1Table = metric_table<&make_f1>();
const tp_metric_v1_t kIouTable = metric_table<&make_iou>();
const tp_metric_v1_t kMaeTable = metric_table<&make_mae>();

const tp::cpp::Component kComponents[] = {
    {&kAccuracyDescriptor, TP_IFACE_METRIC_V1, &kAccuracyTable},
    {&kF1Descriptor, TP_IFACE_METRIC_V1, &kF1Table},
    {&kIouDescriptor, TP_IFACE_METRIC_V1, &kIouTable},
    {&kMaeDescriptor, TP_IFACE_METRIC_V1, &kMaeTable},
};

}  // namespace
}  // namespace tp::metrics

TP_DEFINE_PLUGIN("basic_metrics", TP_TORCH_BUILD_INFO_INIT, tp::metrics::kComponents)
