// Test support for the Tier T plugin tests: loads a built plugin library with dlopen and drives
// it only through the C ABI, with tp::test::FakeHost and tp::test::FakeConfig.
//
// Include this first: LibTorch must come before doctest (c10 defines its own CHECK).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/version.h>
#include <dlfcn.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/doctest_after_torch.h"

#include "support/fake_host.h"
#include "tp/entry.h"
#include "tp/iface/loss.h"
#include "tp/iface/metric.h"
#include "tp/iface/model.h"
#include "support/test_paths.h"

namespace tp::test {

/// A loaded, initialised plugin library. Loaded once per process and never unloaded, so the
/// tensors and instances it handed out stay usable for the whole test run.
struct LoadedPlugin {
  FakeHost host;
  const tp_plugin_entry_t* entry = nullptr;

  /// The static interface table of `component_id` (checked non-NULL), cast to T.
  template <typename T>
  const T& table(const char* component_id, const char* interface_id) const {
    const void* t = entry->get_interface(component_id, interface_id);
    REQUIRE_MESSAGE(t != nullptr, component_id);
    return *static_cast<const T*>(t);
  }
  /// The descriptor of `component_id` (checked present).
  const tp_descriptor_t& descriptor(const char* component_id) const {
    for (uint32_t i = 0; i < entry->descriptor_count(); ++i)
      if (std::strcmp(entry->descriptor_at(i)->id, component_id) == 0) return *entry->descriptor_at(i);
    FAIL("no descriptor " << component_id);
    throw;  // unreachable: FAIL throws
  }
};

/// `<tp::test::plugin_dir()>/<name>.so`, loaded and initialised on first use.
inline LoadedPlugin& plugin(const std::string& name) {
  static std::map<std::string, std::unique_ptr<LoadedPlugin>> loaded;
  auto& slot = loaded[name];
  if (!slot) {
    const std::string path = std::string(tp::test::plugin_dir()) + "/" + name + ".so";
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE_MESSAGE(handle != nullptr, dlerror());
    auto p = std::make_unique<LoadedPlugin>();
    p->entry = static_cast<const tp_plugin_entry_t*>(dlsym(handle, TP_ENTRY_SYMBOL));
    REQUIRE(p->entry != nullptr);
    // Handles are heap-allocated at::Tensor objects; host and plugin share one LibTorch.
    p->host.host.tensor_release = [](const tp_host_t*, tp_tensor h) { delete reinterpret_cast<at::Tensor*>(h); };
    REQUIRE(p->entry->init(&p->host.host) == TP_OK);
    slot = std::move(p);
  }
  return *slot;
}

/// A borrowed handle on a test-owned tensor.
inline tp_tensor handle_of(const at::Tensor& t) { return reinterpret_cast<tp_tensor>(const_cast<at::Tensor*>(&t)); }
/// The tensor behind a borrowed handle.
inline at::Tensor& tensor_of(tp_tensor h) { return *reinterpret_cast<at::Tensor*>(h); }
/// Takes a new reference out of a handle and releases the handle through the host.
inline at::Tensor adopt(const LoadedPlugin& p, tp_tensor h) {
  at::Tensor t = tensor_of(h);
  p.host.host.tensor_release(&p.host.host, h);
  return t;
}

/// Named tensors the test owns; `view()` is the borrowed array a plugin call takes.
struct Fields {
  std::vector<std::pair<std::string, at::Tensor>> items;
  std::vector<tp_named_tensor_t> array;
  Fields(std::initializer_list<std::pair<std::string, at::Tensor>> init) : items(init) {}
  const tp_named_tensor_t* view() {
    array.clear();
    for (auto& [name, t] : items) array.push_back({name.c_str(), handle_of(t)});
    return array.data();
  }
  uint32_t size() const { return static_cast<uint32_t>(items.size()); }
};

/// Fills `cfg` with every default the descriptor declares, as the host does before create().
/// Parses the literal forms used by our plugins: 3, 0.5, "s", [1, 2], [1.0], ["a", "b"].
void fill_defaults(FakeConfig& cfg, const tp_descriptor_t& d);

/// Every parameter and buffer a model or metric visits, in visit order.
struct StateEntry {
  std::string name;
  tp_tensor handle;
  bool is_buffer;
};
std::vector<StateEntry> visit_all(tp_status (*visit_state)(void*, tp_state_visitor, void*), void* self);

}  // namespace tp::test
