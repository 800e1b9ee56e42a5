// torchhost C++ helpers for Tier T plugin authors: a metric as a C++ class, and the C shell
// ("tp.metric/1": create/destroy/to_device/reset/update/visit_state/compute) generated from it.
//
// A metric keeps its state as SUM-reducible tensors (counts, sums; int64 or float64) that the
// class declares once with state(): the adapter moves them in to_device, zeroes them in reset and
// lends them to the host in visit_state, whose in-place all-reduce writes into the class's own
// members. The adapter wraps every call in TP_GUARD (PLG-7) and accepts destroy(NULL) (PLG-12).
//
//   class MeanError {
//    public:
//     explicit MeanError(const tp::cpp::ConfigReader& cfg)              // [main] state zeroed, CPU
//         : output_(cfg.get_string("output")), target_(cfg.get_string("target")) {}
//     std::vector<tp::cpp::StateSlot> state() { return {{"sum", &sum_}, {"count", &count_}}; }
//     void update(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) {  // [main] device work only
//       const at::Tensor error = (outputs.get(output_) - targets.get(target_)).abs();
//       sum_.add_(error.sum().to(at::kDouble));
//       count_.add_(error.numel());
//     }
//     std::vector<tp_scalar_t> compute() {                                // [main] reads the state: syncs
//       return {{"mean_error", sum_.item<double>() / std::max(count_.item<double>(), 1.0)}};
//     }
//    private:
//     std::string output_, target_;
//     at::Tensor sum_ = at::zeros({}, at::kDouble), count_ = at::zeros({}, at::kLong);
//   };
//   const tp_descriptor_t kDescriptor = tp::cpp::metric_descriptor("org.example.mean_error", "1.0.0", "|y - t|", kKeys);
//   TP_DEFINE_METRIC_PLUGIN("mean_error", MeanError, kDescriptor)
//
// What the class provides (M below):
//   M(const ConfigReader&)                   or a factory: metric_component<M, kDescriptor, &make>()
//                                            with `std::shared_ptr<M>` (or `std::unique_ptr<M>`)
//                                            `make(const ConfigReader&)`; M may then be an abstract base
//   std::vector<StateSlot> state()           the state tensors, in a fixed order; the pointers live
//                                            as long as the metric
//   void update(const Fields& outputs, const Fields& targets)
//                                            adds one batch to the state, on the device, under
//                                            no-grad; never reads a value back (PLG-11)
//   std::vector<tp_scalar_t> compute()       the values from the (all-reduced) state; names in
//                                            static storage
//   std::vector<GatheredSlot> gathered_state()
//                                            optional (ABI 1.7): rows concatenated across ranks
//                                            instead of summed (tp/cpp/gathered_rows.h), for values
//                                            that do not add up; moved, emptied and lent like state()
#ifndef TP_CPP_METRIC_ADAPTER_H
#define TP_CPP_METRIC_ADAPTER_H

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "tp/cpp/adapter.h"
#include "tp/cpp/config.h"
#include "tp/cpp/fields.h"
#include "tp/cpp/gathered_rows.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/plugin.h"
#include "tp/cpp/tensor.h"
#include "tp/iface/metric.h"

namespace tp::cpp {

/// One state tensor of a metric: its name (static storage) and the member holding it. The
/// member's address is what visit_state lends, so the host's in-place all-reduce writes into the
/// metric, and to_device replaces the member (handles lent before stay valid).
struct StateSlot {
  const char* name;
  at::Tensor* tensor;
};

namespace detail {

/// Whether metric class M declares rows gathered across ranks (gathered_state(), ABI 1.7).
template <typename M, typename = void>
struct HasGatheredState : std::false_type {};
template <typename M>
struct HasGatheredState<M, std::void_t<decltype(std::vector<GatheredSlot>(std::declval<M&>().gathered_state()))>>
    : std::true_type {};

template <typename M, const tp_descriptor_t& kDescriptor, auto kFactory>
struct MetricAdapter : AdapterBase<M, kDescriptor, kFactory> {
  using Base = AdapterBase<M, kDescriptor, kFactory>;
  using Base::host_of;
  using Base::name;

  static M& metric(void* self, const char* call) { return Base::object(self, call); }

  static tp_status to_device(void* self, int32_t device_type, int32_t device_index) {
    TP_GUARD(host_of(self), {
      at::Device device(at::kCPU);
      if (device_type == TP_DEVICE_CUDA) device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_index));
      else if (device_type != TP_DEVICE_CPU)
        throw Failure(TP_ERR_INVALID_ARGUMENT,
                      std::string(name()) + ": to_device: unknown device type " + std::to_string(device_type));
      M& m = metric(self, "to_device");
      for (const StateSlot& slot : m.state()) *slot.tensor = slot.tensor->to(device);
      if constexpr (HasGatheredState<M>::value)
        for (const GatheredSlot& slot : m.gathered_state()) slot.rows->to(device);
      return TP_OK;
    });
  }

  static tp_status reset(void* self) {
    TP_GUARD(host_of(self), {
      M& m = metric(self, "reset");
      for (const StateSlot& slot : m.state()) slot.tensor->zero_();
      if constexpr (HasGatheredState<M>::value)
        for (const GatheredSlot& slot : m.gathered_state()) slot.rows->clear();
      return TP_OK;
    });
  }

  static tp_status update(void* self, const tp_named_tensor_t* outputs, uint32_t output_count,
                          const tp_named_tensor_t* targets, uint32_t target_count) {
    TP_GUARD(host_of(self), {
      M& m = metric(self, "update");
      if ((outputs == nullptr && output_count > 0) || (targets == nullptr && target_count > 0))
        throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(name()) + ": update: outputs or targets is NULL");
      m.update(Fields(outputs, output_count, "output"), Fields(targets, target_count, "target"));
      return TP_OK;
    });
  }

  static tp_status visit_state(void* self, tp_state_visitor visit, void* user) {
    TP_GUARD(host_of(self), {
      M& m = metric(self, "visit_state");
      if (visit == nullptr)
        throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(name()) + ": visit_state: visitor is NULL");
      for (const StateSlot& slot : m.state()) {
        const tp_status status = visit(user, slot.name, borrow_handle(*slot.tensor), true);
        if (status != TP_OK) return status;  // the visitor recorded its own message
      }
      return TP_OK;
    });
  }

  // Lends each slot's rows concatenated (GatheredRows::rows()), the tensor the host's gather
  // replaces in place.
  static tp_status visit_gathered_state(void* self, tp_state_visitor visit, void* user) {
    TP_GUARD(host_of(self), {
      M& m = metric(self, "visit_gathered_state");
      if (visit == nullptr)
        throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(name()) + ": visit_gathered_state: visitor is NULL");
      for (const GatheredSlot& slot : m.gathered_state()) {
        const tp_status status = visit(user, slot.name, borrow_handle(slot.rows->rows()), true);
        if (status != TP_OK) return status;
      }
      return TP_OK;
    });
  }

  static tp_status compute(void* self, tp_scalar_t* out_values, uint32_t capacity, uint32_t* out_count) {
    TP_GUARD(host_of(self), {
      const std::string prefix = std::string(name()) + ": compute";
      if (out_count == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, prefix + ": out_count is NULL");
      *out_count = 0;
      const std::vector<tp_scalar_t> values = metric(self, "compute").compute();
      if (values.size() > capacity || (out_values == nullptr && !values.empty()))
        throw Failure(TP_ERR_INVALID_ARGUMENT, prefix + ": the metric has " + std::to_string(values.size()) +
                                                   " values but capacity is " + std::to_string(capacity));
      for (std::size_t i = 0; i < values.size(); ++i) out_values[i] = values[i];
      *out_count = static_cast<uint32_t>(values.size());
      return TP_OK;
    });
  }

  static constexpr tp_metric_v1_t table() {
    tp_metric_v1_t t{sizeof(tp_metric_v1_t), &Base::create, &Base::destroy, &to_device, &reset, &update, &visit_state,
                     &compute, nullptr};
    if constexpr (HasGatheredState<M>::value) t.visit_gathered_state = &visit_gathered_state;
    return t;
  }
};

template <typename M, const tp_descriptor_t& kDescriptor, auto kFactory>
inline constexpr tp_metric_v1_t kMetricTable = MetricAdapter<M, kDescriptor, kFactory>::table();

}  // namespace detail

/// The descriptor of a metric component: kind metric, Tier T, the schema `keys` (PLG-6). Static
/// strings.
template <std::size_t N>
constexpr tp_descriptor_t metric_descriptor(const char* id, const char* version, const char* description,
                                            const tp_config_key_t (&keys)[N]) {
  return component_descriptor(TP_KIND_METRIC, TP_TIER_T, id, version, description, keys, N, nullptr, 0);
}

/// The component entry (descriptor, "tp.metric/1", generated table) of metric class `M`, built
/// by `M(const ConfigReader&)` or, when given, by `kFactory` (`std::shared_ptr<M>` or
/// `std::unique_ptr<M>` `(*)(const ConfigReader&)`, M may then be an abstract base).
/// `kDescriptor` has static storage.
template <typename M, const tp_descriptor_t& kDescriptor, auto kFactory = nullptr>
constexpr Component metric_component() {
  return {&kDescriptor, TP_IFACE_METRIC_V1, &detail::kMetricTable<M, kDescriptor, kFactory>};
}

}  // namespace tp::cpp

/// Defines `tp_entry` of a Tier T library NAME (its .so base name) whose one component is the
/// metric class CLASS described by DESCRIPTOR (a namespace-scope tp_descriptor_t).
#define TP_DEFINE_METRIC_PLUGIN(NAME, CLASS, DESCRIPTOR)                                         \
  namespace {                                                                                    \
  const ::tp::cpp::Component tp_detail_metric_components[] = {                                   \
      ::tp::cpp::metric_component<CLASS, DESCRIPTOR>()};                                         \
  }                                                                                              \
  TP_DEFINE_PLUGIN(NAME, TP_TORCH_BUILD_INFO_INIT, tp_detail_metric_components)

#endif  // TP_CPP_METRIC_ADAPTER_H
