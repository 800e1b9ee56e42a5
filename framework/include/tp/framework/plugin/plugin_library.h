// One loaded plugin library: dlopen (RTLD_NOW | RTLD_LOCAL through Boost.DLL), ABI negotiation,
// the Tier T build-fingerprint check, init/deinit, and its validated component descriptors.
//
// Lifetime: every object a library creates (component instances, tensors whose DLPack deleter is
// plugin code) holds a std::shared_ptr<PluginLibrary>, so deinit() and dlclose run only after the
// last of them is gone (PLG-13: using plugin code after unload segfaults).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tp/entry.h"
#include "tp/framework/config/schema.h"

namespace tp {

class HostServices;

/// A validated component descriptor, copied out of the plugin (min(struct_size, sizeof)).
struct ComponentInfo {
  std::string id;
  int32_t kind = 0;
  int32_t tier = 0;
  std::string version;
  std::string description;
  std::vector<KeySpec> schema;
  std::vector<tp_example_input_t> examples;
  uint32_t flags = 0;
  const void* interface_table = nullptr; ///< static table in the plugin, for the kind's interface
};

/// The host's own build fingerprint, compared with a Tier T plugin's tp_build_info_t.
struct BuildFingerprint {
  std::string torch_version;
  int cxx11_abi = -1;
  int device_build = 0;
  /// The host's fingerprint.
  static BuildFingerprint host();
  std::string describe() const;
};

/// Whether `id` is a component id as PLG-5 has it: reverse-DNS ("org.example.my_model"), ASCII
/// letters, digits, '_' and '-' between single dots.
bool is_component_id(std::string_view id);

/// Interface id for a kind ("tp.model/1"), and a kind's readable name ("model").
const char* interface_id_for_kind(int32_t kind);
const char* kind_name(int32_t kind);

class PluginLibrary {
 public:
  /// Loads and initialises `path`. Throws PluginLoadError naming the file and the reason: not
  /// loadable (dlerror text), no `tp_entry`, bad struct_size, ABI major/minor mismatch, build
  /// fingerprint mismatch, init() failure (with the plugin's message), or an invalid descriptor.
  static std::shared_ptr<PluginLibrary> load(const std::filesystem::path& path, const HostServices& host);

  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// The plugin's own name (tp_entry.name).
  const std::string& name() const { return name_; }
  tp_version_t abi() const { return entry_.abi; }
  const std::vector<ComponentInfo>& components() const { return components_; }
  const tp_host_t* host() const { return host_; }

 private:
  struct Impl;
  PluginLibrary(std::filesystem::path path, std::unique_ptr<Impl> impl);
  void negotiate();
  void check_fingerprint() const;
  void read_descriptors();

  std::filesystem::path path_;
  std::unique_ptr<Impl> impl_; // the Boost.DLL handle; destroyed last
  tp_plugin_entry_t entry_{};
  tp_build_info_t build_{};
  std::string name_;
  const tp_host_t* host_ = nullptr;
  bool initialised_ = false;
  std::vector<ComponentInfo> components_;
};

}  // namespace tp
