// torchhost C++ helpers for plugin authors: defining the `tp_entry` symbol of a library.
//
// A C++ plugin lists its components and lets TP_DEFINE_PLUGIN generate the entry table:
//
//   static const tp::cpp::Component kComponents[] = {
//     {&kMlpDescriptor, TP_IFACE_MODEL_V1, &kMlpTable},
//   };
//   TP_DEFINE_PLUGIN("models", TP_TORCH_BUILD_INFO_INIT, kComponents)
//
// Tier S libraries pass TP_STABLE_BUILD_INFO_INIT (tp/entry.h). Inside the library, tp::cpp::plugin_host()
// returns the host pointer given to init() (NULL before init and after deinit).
#ifndef TP_CPP_PLUGIN_H
#define TP_CPP_PLUGIN_H

#include <cstdint>
#include <cstring>
#include <iterator>

#include "tp/entry.h"

namespace tp::cpp {

/// One component of a library: its descriptor and the interface table it implements.
struct Component {
  const tp_descriptor_t* descriptor;
  const char* interface_id; // TP_IFACE_*_V1
  const void* table;        // static interface table
};

/// The last segment of a component id ("shapes" for "org.torchhost.shapes"): the prefix of the
/// messages the adapters (tp/cpp/*_adapter.h) write. Points into `descriptor.id`.
inline const char* component_name(const tp_descriptor_t& descriptor) noexcept {
  const char* dot = std::strrchr(descriptor.id, '.');
  return dot != nullptr ? dot + 1 : descriptor.id;
}

/// The host pointer of this library. Libraries are built with hidden visibility, so each
/// library has its own slot.
inline const tp_host_t*& plugin_host() {
  static const tp_host_t* host = nullptr;
  return host;
}

namespace detail {
template <const auto& kComponents>
struct EntryFunctions {
  static tp_status init(const tp_host_t* host) {
    plugin_host() = host;
    return TP_OK;
  }
  static void deinit() { plugin_host() = nullptr; }
  static uint32_t count() { return static_cast<uint32_t>(std::size(kComponents)); }
  static const tp_descriptor_t* at(uint32_t index) {
    return index < count() ? kComponents[index].descriptor : nullptr;
  }
  static const void* get_interface(const char* component_id, const char* interface_id) {
    if (component_id == nullptr || interface_id == nullptr) return nullptr;
    for (const Component& c : kComponents) {
      if (std::strcmp(c.descriptor->id, component_id) == 0 &&
          std::strcmp(c.interface_id, interface_id) == 0)
        return c.table;
    }
    return nullptr;
  }
};
}  // namespace detail

}  // namespace tp::cpp

/// Defines the exported `tp_entry` for a library named NAME (its .so base name) whose components
/// are the static array COMPONENTS (of tp::cpp::Component).
#define TP_DEFINE_PLUGIN(NAME, BUILD_INFO, COMPONENTS)                                       \
  namespace {                                                                                \
  const tp_build_info_t tp_detail_build_info = BUILD_INFO;                                   \
  using tp_detail_entry_functions = ::tp::cpp::detail::EntryFunctions<COMPONENTS>;           \
  }                                                                                          \
  extern "C" TP_EXPORT const tp_plugin_entry_t tp_entry = {                                  \
      sizeof(tp_plugin_entry_t),          TP_ABI_VERSION_INIT,                               \
      &tp_detail_build_info,              NAME,                                              \
      &tp_detail_entry_functions::init,   &tp_detail_entry_functions::deinit,                \
      &tp_detail_entry_functions::count,  &tp_detail_entry_functions::at,                    \
      &tp_detail_entry_functions::get_interface};

#endif  // TP_CPP_PLUGIN_H
