// torchhost C++ helpers for Tier T plugin authors: a batch transform as a C++ class, and the C
// shell ("tp.batch_transform/1", plugin ABI 1.3: create/destroy/apply) generated from it.
//
// The adapter wraps every call in TP_GUARD (PLG-7), hands outputs over only when apply succeeds
// (PLG-9: on error no output is handed over) and accepts destroy(NULL) (PLG-12).
//
//   class Brighten {
//    public:
//     explicit Brighten(const tp::cpp::ConfigReader& cfg) : input_(cfg.get_string("input")) {}  // [main]
//     tp::cpp::Outputs apply(uint64_t seed, const tp::cpp::Inputs& batch) {    // [main] device work
//       const at::Tensor& x = batch.get(input_);
//       const double gain = 1.0 + static_cast<double>(seed % 5) / 100.0;       // randomness: only `seed`
//       return {{input_.c_str(), x * gain}};                                   // replaces field `input_`
//     }
//    private:
//     std::string input_;
//   };
//   const tp_descriptor_t kDescriptor = tp::cpp::batch_transform_descriptor("org.example.brighten", "1.0.0", "x * g", kKeys);
//   TP_DEFINE_BATCH_TRANSFORM_PLUGIN("brighten", Brighten, kDescriptor)
//
// What the class provides (T below):
//   T(const ConfigReader&)                   or a factory: batch_transform_component<T, kDescriptor, &make>()
//                                            with `std::shared_ptr<T> make(const ConfigReader&)`
//   Outputs apply(uint64_t seed, const Inputs&)  the replaced (or added) fields; names valid until
//                                            destroy; never modify the inputs in place; draw random
//                                            numbers only from `seed` (PLG-8)
#ifndef TP_CPP_BATCH_TRANSFORM_ADAPTER_H
#define TP_CPP_BATCH_TRANSFORM_ADAPTER_H

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tp/cpp/adapter.h"
#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/model_adapter.h"  // Inputs, Output, Outputs: a transform sees the batch as a model does
#include "tp/cpp/plugin.h"
#include "tp/cpp/tensor.h"
#include "tp/iface/batch_transform.h"

namespace tp::cpp {
namespace detail {

template <typename T, const tp_descriptor_t& kDescriptor, auto kFactory>
struct BatchTransformAdapter : AdapterBase<T, kDescriptor, kFactory> {
  using Base = AdapterBase<T, kDescriptor, kFactory>;

  static tp_status apply(void* self, uint64_t seed, const tp_named_tensor_t* fields, uint32_t field_count,
                         tp_named_tensor_t* out_fields, uint32_t capacity, uint32_t* out_count) {
    TP_GUARD(Base::host_of(self), {
      const std::string prefix = std::string(Base::name()) + ": apply";
      T& transform = Base::object(self, "apply");
      if (out_count == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, prefix + ": out_count is NULL");
      *out_count = 0;
      if (fields == nullptr && field_count > 0) throw Failure(TP_ERR_INVALID_ARGUMENT, prefix + ": fields is NULL");
      Outputs outputs = transform.apply(seed, Inputs(fields, field_count));
      hand_over<&Output::tensor>(outputs, out_fields, capacity, out_count, prefix, "outputs", "an output");
      return TP_OK;
    });
  }

  static constexpr tp_batch_transform_v1_t table() {
    return {sizeof(tp_batch_transform_v1_t), &Base::create, &Base::destroy, &apply};
  }
};

template <typename T, const tp_descriptor_t& kDescriptor, auto kFactory>
inline constexpr tp_batch_transform_v1_t kBatchTransformTable = BatchTransformAdapter<T, kDescriptor, kFactory>::table();

}  // namespace detail

/// The descriptor of a batch transform component: kind batch_transform, Tier T, the schema `keys`
/// (PLG-6) and the per-sample example fields `host plugins check` builds a batch from. Static strings.
template <std::size_t N, std::size_t E>
constexpr tp_descriptor_t batch_transform_descriptor(const char* id, const char* version, const char* description,
                                                     const tp_config_key_t (&keys)[N],
                                                     const tp_example_input_t (&examples)[E]) {
  return component_descriptor(TP_KIND_BATCH_TRANSFORM, TP_TIER_T, id, version, description, keys, N, examples, E);
}

/// The component entry (descriptor, "tp.batch_transform/1", generated table) of transform class
/// `T`, built by `T(const ConfigReader&)` or, when given, by `kFactory`.
template <typename T, const tp_descriptor_t& kDescriptor, auto kFactory = nullptr>
constexpr Component batch_transform_component() {
  return {&kDescriptor, TP_IFACE_BATCH_TRANSFORM_V1, &detail::kBatchTransformTable<T, kDescriptor, kFactory>};
}

}  // namespace tp::cpp

/// Defines `tp_entry` of a Tier T library NAME whose one component is the transform class CLASS
/// described by DESCRIPTOR (a namespace-scope tp_descriptor_t).
#define TP_DEFINE_BATCH_TRANSFORM_PLUGIN(NAME, CLASS, DESCRIPTOR)                                \
  namespace {                                                                                    \
  const ::tp::cpp::Component tp_detail_batch_transform_components[] = {                          \
      ::tp::cpp::batch_transform_component<CLASS, DESCRIPTOR>()};                                \
  }                                                                                              \
  TP_DEFINE_PLUGIN(NAME, TP_TORCH_BUILD_INFO_INIT, tp_detail_batch_transform_components)

#endif  // TP_CPP_BATCH_TRANSFORM_ADAPTER_H
