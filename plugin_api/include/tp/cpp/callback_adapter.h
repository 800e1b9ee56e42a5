// torchhost C++ helpers for Tier S plugin authors: a callback as a C++ class, and the C shell
// ("tp.callback/1": create/destroy/on_event) generated from it. No LibTorch (PLG-14).
//
// The adapter validates every pointer, wraps each call in TP_GUARD (PLG-7) and accepts
// destroy(NULL) (PLG-12):
//
//   class StopAfter {
//    public:
//     explicit StopAfter(const tp::cpp::CallbackArgs& args)           // [main] throw Failure to refuse
//         : epochs_(args.config.get_int_in("epochs", 1, 1 << 20)) {}
//     uint32_t on_event(const tp_event_t& event) {                      // [main] TP_REQUEST_* mask
//       return event.kind == TP_EVENT_EPOCH_END && event.epoch + 1 >= uint64_t(epochs_) ? uint32_t{TP_REQUEST_STOP} : 0u;
//     }
//    private:
//     int64_t epochs_;
//   };
//   const tp_descriptor_t kDescriptor = tp::cpp::callback_descriptor("org.example.stop_after", "1.0.0", "stops", kKeys);
//   TP_DEFINE_CALLBACK_PLUGIN("stop_after", StopAfter, kDescriptor)
#ifndef TP_CPP_CALLBACK_ADAPTER_H
#define TP_CPP_CALLBACK_ADAPTER_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/plugin.h"
#include "tp/iface/callback.h"

namespace tp::cpp {

/// What a callback's constructor receives: the config (borrowed for the constructor only) and
/// the host (valid until deinit: keep it to log from on_event).
struct CallbackArgs {
  const ConfigReader& config;
  const tp_host_t* host;
  const char* component;  ///< message prefix: the last segment of the component id

  /// Writes `line` to the host log at `level` (TP_LOG_*); does nothing without a host.
  void log(int32_t level, const std::string& line) const {
    if (host != nullptr && host->log != nullptr) host->log(host, level, line.c_str());
  }
};

namespace detail {

template <typename C>
struct CallbackInstance {
  template <typename... Args>
  CallbackInstance(const tp_host_t* h, Args&&... args) : host(h), callback(std::forward<Args>(args)...) {}
  const tp_host_t* host;
  C callback;
};

template <typename C, const tp_descriptor_t& kDescriptor>
struct CallbackAdapter {
  using Instance = CallbackInstance<C>;

  static const char* name() noexcept { return component_name(kDescriptor); }

  static tp_status create(const tp_host_t* host, const tp_config_t* cfg, void** out_self) {
    TP_GUARD(host != nullptr ? host : plugin_host(), {
      if (out_self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(name()) + ": out_self is NULL");
      *out_self = nullptr;
      const ConfigReader config(cfg, name());
      *out_self = new Instance(host, CallbackArgs{config, host, name()});
      return TP_OK;
    });
  }

  static void destroy(void* self) { delete static_cast<Instance*>(self); }

  static tp_status on_event(void* self, const tp_event_t* event, uint32_t* out_requests) {
    auto* instance = static_cast<Instance*>(self);
    TP_GUARD(instance != nullptr ? instance->host : plugin_host(), {
      if (instance == nullptr || event == nullptr || out_requests == nullptr)
        throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(name()) + ": on_event needs self, event and out_requests");
      *out_requests |= instance->callback.on_event(*event);
      return TP_OK;
    });
  }

  static constexpr tp_callback_v1_t table() { return {sizeof(tp_callback_v1_t), &create, &destroy, &on_event}; }
};

template <typename C, const tp_descriptor_t& kDescriptor>
inline constexpr tp_callback_v1_t kCallbackTable = CallbackAdapter<C, kDescriptor>::table();

}  // namespace detail

/// The descriptor of a callback component: kind callback, Tier S, the schema `keys` (PLG-6).
template <std::size_t N>
constexpr tp_descriptor_t callback_descriptor(const char* id, const char* version, const char* description,
                                              const tp_config_key_t (&keys)[N]) {
  return {sizeof(tp_descriptor_t), id, TP_KIND_CALLBACK, TP_TIER_S, version, description, keys,
          static_cast<uint32_t>(N), nullptr, 0, 0};
}

/// The component entry (descriptor, "tp.callback/1", generated table) of callback class `C`.
template <typename C, const tp_descriptor_t& kDescriptor>
constexpr Component callback_component() {
  return {&kDescriptor, TP_IFACE_CALLBACK_V1, &detail::kCallbackTable<C, kDescriptor>};
}

}  // namespace tp::cpp

/// Defines `tp_entry` of a Tier S library NAME (its .so base name) whose one component is the
/// callback class CLASS described by DESCRIPTOR (a namespace-scope tp_descriptor_t).
#define TP_DEFINE_CALLBACK_PLUGIN(NAME, CLASS, DESCRIPTOR)                                       \
  namespace {                                                                                    \
  const ::tp::cpp::Component tp_detail_callback_components[] = {                                 \
      ::tp::cpp::callback_component<CLASS, DESCRIPTOR>()};                                       \
  }                                                                                              \
  TP_DEFINE_PLUGIN(NAME, TP_STABLE_BUILD_INFO_INIT, tp_detail_callback_components)

#endif  // TP_CPP_CALLBACK_ADAPTER_H
