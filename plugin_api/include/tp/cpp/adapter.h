// torchhost C++ helpers for plugin authors: what the component adapters (tp/cpp/*_adapter.h)
// share. A plugin author rarely includes it directly: `component_descriptor` builds a descriptor
// of any kind; the rest (namespace detail) is how an adapter creates, finds and destroys the
// instance of a C++ class behind the C ABI's `void* self`, and hands tensors over.
//
// An adapter's instance is the class's object plus the host it was created with (for messages):
// `create` builds the object from the validated config with the class's constructor or a factory,
// behind TP_GUARD (PLG-7), and hands it over only when that succeeds; `destroy` accepts NULL
// (PLG-12). The loss, metric and batch transform adapters are written on it; the model, dataset and
// callback adapters predate it and keep instances of their own (they carry more state).
#ifndef TP_CPP_ADAPTER_H
#define TP_CPP_ADAPTER_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/plugin.h"
#include "tp/entry.h"
#include "tp/iface/tensor.h"

namespace tp::cpp {

/// A descriptor of a component of `kind` (TP_KIND_*) and `tier` (TP_TIER_*, PLG-14): the schema
/// `keys` (PLG-6) and, where the kind uses them, example fields (NULL, 0 otherwise). Static strings
/// and arrays. The kind's own helper (model_descriptor, loss_descriptor, ...) is usually shorter.
constexpr tp_descriptor_t component_descriptor(int32_t kind, int32_t tier, const char* id, const char* version,
                                               const char* description, const tp_config_key_t* keys, std::size_t key_count,
                                               const tp_example_input_t* examples, std::size_t example_count) {
  return {sizeof(tp_descriptor_t), id, kind, tier, version, description, keys, static_cast<uint32_t>(key_count),
          examples, static_cast<uint32_t>(example_count), 0};
}

namespace detail {

/// What an adapter hands the host as `self`: the class's object and the host it came from.
template <typename T>
struct AdaptedInstance {
  const tp_host_t* host;
  std::shared_ptr<T> object;
};

/// create, destroy and the lookups of an adapter of class `T`, built by `T(const ConfigReader&)`
/// or, when not nullptr, by `kFactory` (returning std::shared_ptr<T> or std::unique_ptr<T>).
/// Messages start with the last segment of the component id (component_name).
template <typename T, const tp_descriptor_t& kDescriptor, auto kFactory>
struct AdapterBase {
  using Instance = AdaptedInstance<T>;

  static const char* name() noexcept { return component_name(kDescriptor); }

  /// The host to report through: the instance's, else the library's (NULL before init).
  static const tp_host_t* host_of(const void* self) noexcept {
    return self != nullptr ? static_cast<const Instance*>(self)->host : plugin_host();
  }

  /// The object behind `self`; throws Failure(TP_ERR_INVALID_ARGUMENT, "<name>: <call>: instance
  /// is NULL") for NULL.
  static T& object(void* self, const char* call) {
    if (self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(name()) + ": " + call + ": instance is NULL");
    return *static_cast<Instance*>(self)->object;
  }

  /// [main] The ABI's create: `*out_self` is NULL until the object exists.
  static tp_status create(const tp_host_t* host, const tp_config_t* cfg, void** out_self) {
    TP_GUARD(host != nullptr ? host : plugin_host(), {
      if (out_self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(name()) + ": out_self is NULL");
      *out_self = nullptr;
      const ConfigReader config(cfg, name());
      auto instance = std::make_unique<Instance>();
      instance->host = host;
      if constexpr (std::is_same_v<decltype(kFactory), std::nullptr_t>) instance->object = std::make_shared<T>(config);
      else instance->object = kFactory(config);
      if (instance->object == nullptr)
        throw Failure(TP_ERR_INTERNAL, std::string(name()) + ": the factory returned no instance");
      *out_self = instance.release();
      return TP_OK;
    });
  }

  /// [main] The ABI's destroy; accepts NULL (PLG-12).
  static void destroy(void* self) { delete static_cast<Instance*>(self); }
};

/// Hands `items` (each with `const char* name` and an at::Tensor member `kTensor`, e.g.
/// &Output::tensor) to the host as new references in `out`, all or none (PLG-9): throws
/// Failure(TP_ERR_INVALID_ARGUMENT, "<prefix>: <n> <what> but capacity is <capacity>") when they
/// do not fit, or "<prefix>: <one> has no name" ("an output"); every handle is made before any is
/// handed over, so a failed allocation frees the ones made and the host receives none. Sets
/// *out_count only on success. Tier T (the tensors are at::Tensor).
template <auto kTensor, typename Items>
void hand_over(Items& items, tp_named_tensor_t* out, uint32_t capacity, uint32_t* out_count, const std::string& prefix,
               const char* what, const char* one) {
  using Tensor = std::remove_reference_t<decltype(items[0].*kTensor)>;
  if (items.size() > capacity || (out == nullptr && !items.empty()))
    throw Failure(TP_ERR_INVALID_ARGUMENT, prefix + ": " + std::to_string(items.size()) + " " + what +
                                               " but capacity is " + std::to_string(capacity));
  std::vector<std::unique_ptr<Tensor>> handles;
  handles.reserve(items.size());
  for (auto& item : items) {
    if (item.name == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, prefix + ": " + one + " has no name");
    handles.push_back(std::make_unique<Tensor>(std::move(item.*kTensor)));
  }
  for (std::size_t i = 0; i < items.size(); ++i) out[i] = {items[i].name, reinterpret_cast<tp_tensor>(handles[i].release())};
  *out_count = static_cast<uint32_t>(items.size());
}

}  // namespace detail
}  // namespace tp::cpp

#endif  // TP_CPP_ADAPTER_H
