// The plugin registry: finds plugin libraries on the search path, loads them, and maps component
// ids to their library and descriptor (docs/architecture.md, run step 3).
//
// Search path, highest precedence first: --plugin-dir (repeatable), [plugins] dirs in the config,
// TORCHHOST_PLUGIN_PATH (colon-separated), the built-in directory next to the executable. Every
// `*.so` in those directories is loaded. A component id found in two files of the same directory
// level is an error naming both files; a higher-precedence directory shadows a lower one (a user's
// rebuilt plugin replaces the built-in), which is logged.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tp/framework/plugin/plugin_library.h"

namespace tp {

class HostServices;

/// One directory of the search path and where it came from (for messages).
struct PluginDir {
  std::filesystem::path path;
  /// "--plugin-dir", "plugins.dirs", "TORCHHOST_PLUGIN_PATH", "built-in", or the inference library's
  /// "OpenOptions::plugin_dirs"; a missing directory of those the user named is an error.
  std::string origin;
};

/// Builds the ordered search path. `env_path` is TORCHHOST_PLUGIN_PATH's value (may be empty).
std::vector<PluginDir> plugin_search_path(const std::vector<std::string>& cli_dirs,
                                          const std::vector<std::string>& config_dirs,
                                          const std::string& env_path,
                                          const std::filesystem::path& builtin_dir);

/// The built-in plugin directory of the running host: builtin_plugin_dir_of(executable_dir())
/// (install_layout.h: <exe dir>/../lib/torchhost/plugins installed, <exe dir>/../plugins in a build).
std::filesystem::path builtin_plugin_dir();

/// A loaded component: its descriptor and the library that must outlive its instances.
struct ComponentEntry {
  const ComponentInfo* info = nullptr;
  std::shared_ptr<PluginLibrary> library;
};

class Registry {
 public:
  explicit Registry(const HostServices& host) : host_(host) {}

  /// --allow-insecure-plugin-dir: load from group/world-writable or foreign-owned plugin files
  /// and directories (see plugin_security.h). Off by default.
  void allow_insecure_plugin_dirs(bool allow) { allow_insecure_ = allow; }

  /// Where this registry's libraries come from. By default each file is loaded and initialised
  /// with this registry's host table. A process that keeps several registries alive at once (the
  /// inference library's open models) gives them one loader, so that a file, which the dynamic
  /// loader keeps once per process, is initialised once and unloaded once (PLG-13).
  using LibraryLoader = std::function<std::shared_ptr<PluginLibrary>(const std::filesystem::path&)>;
  void use_loader(LibraryLoader loader) { loader_ = std::move(loader); }

  /// A library file on the search path that could not be loaded, and why (list_unusable_files).
  struct UnusableFile {
    std::filesystem::path file;
    std::string reason;
  };
  /// For `host plugins list` only: load_search_path records a library that cannot be loaded (an
  /// ABI or LibTorch mismatch, an unresolved symbol, a failed init) in unusable() and goes on,
  /// so the listing shows what loads and what does not. A run never sets it: a run that skipped a
  /// file could train with a same-named component from a directory lower on the path.
  void list_unusable_files(bool keep_going) { keep_going_ = keep_going; }
  /// The files list_unusable_files skipped, in load order.
  const std::vector<UnusableFile>& unusable() const { return unusable_; }

  /// Loads every plugin on `dirs` (see the file comment). Throws PluginLoadError for the first
  /// library that cannot be loaded (unless list_unusable_files), its message saying that every
  /// file on the path is loaded, used or not; for an insecure directory or file
  /// (plugin_security.h) and for duplicate ids; a missing directory that the user named
  /// explicitly is an error too (built-in or env directories may be absent).
  void load_search_path(const std::vector<PluginDir>& dirs);
  /// Loads one library file (`host plugins check FILE`).
  std::shared_ptr<PluginLibrary> load_file(const std::filesystem::path& file);

  /// The component `id` of kind `kind`. Throws ConfigError naming `key_path` with the closest known
  /// id of that kind when it is unknown, or when it exists but is of another kind.
  ComponentEntry find(const std::string& id, int32_t kind, const std::string& key_path) const;
  /// Every loaded component, sorted by id.
  std::vector<ComponentEntry> all() const;
  /// Every loaded library, in load order.
  const std::vector<std::shared_ptr<PluginLibrary>>& libraries() const { return libraries_; }

 private:
  void add_components(const std::shared_ptr<PluginLibrary>& library, std::size_t level,
                      const std::filesystem::path& file);
  std::shared_ptr<PluginLibrary> load_library(const std::filesystem::path& file) const;

  const HostServices& host_;
  bool allow_insecure_ = false;
  bool keep_going_ = false;
  std::vector<UnusableFile> unusable_;
  LibraryLoader loader_;
  std::vector<std::shared_ptr<PluginLibrary>> libraries_;
  struct Slot {
    ComponentEntry entry;
    std::size_t level; ///< search-path index it came from; lower wins
    std::filesystem::path file; ///< the file this registry loaded it from, for messages
  };
  std::map<std::string, Slot> components_;
};

}  // namespace tp
