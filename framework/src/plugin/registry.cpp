#include "tp/framework/plugin/registry.h"

#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "tp/framework/config/closest_key.h"
#include "tp/framework/config/install_layout.h"
#include "tp/framework/error.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/plugin_security.h"
#include "tp/framework/util/log.h"

namespace tp {

std::vector<PluginDir> plugin_search_path(const std::vector<std::string>& cli_dirs,
                                          const std::vector<std::string>& config_dirs,
                                          const std::string& env_path,
                                          const std::filesystem::path& builtin_dir) {
  std::vector<PluginDir> dirs;
  for (const auto& d : cli_dirs) dirs.push_back({d, "--plugin-dir"});
  for (const auto& d : config_dirs) dirs.push_back({d, "plugins.dirs"});
  std::stringstream env(env_path);
  for (std::string d; std::getline(env, d, ':');)
    if (!d.empty()) dirs.push_back({d, "TORCHHOST_PLUGIN_PATH"});
  if (!builtin_dir.empty()) dirs.push_back({builtin_dir, "built-in"});
  return dirs;
}

std::filesystem::path builtin_plugin_dir() { return builtin_plugin_dir_of(executable_dir()); }

void Registry::load_search_path(const std::vector<PluginDir>& dirs) {
  // A directory may appear twice (e.g. --plugin-dir build/plugins, which is also the built-in
  // directory). dlopen would hand back the same library, so init() and deinit() would pair up
  // wrongly; each real directory is scanned once, at its highest precedence.
  std::vector<std::filesystem::path> scanned;
  for (std::size_t level = 0; level < dirs.size(); ++level) {
    const PluginDir& dir = dirs[level];
    if (!std::filesystem::is_directory(dir.path)) {
      if (dir.origin == "--plugin-dir" || dir.origin == "plugins.dirs" || dir.origin == "OpenOptions::plugin_dirs")
        throw PluginLoadError("plugin directory '" + dir.path.string() + "' (from " + dir.origin +
                              ") does not exist or is not a directory.");
      continue;
    }
    const auto canonical = std::filesystem::canonical(dir.path);
    if (std::find(scanned.begin(), scanned.end(), canonical) != scanned.end()) continue;
    scanned.push_back(canonical);
    require_secure_plugin_path(canonical, allow_insecure_);
    // Sorted so that load order, and therefore any error, is the same on every machine.
    std::vector<std::filesystem::path> files;
    for (const auto& item : std::filesystem::directory_iterator(dir.path))
      if (item.is_regular_file() && item.path().extension() == ".so") files.push_back(item.path());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      require_secure_plugin_path(file, allow_insecure_);
      std::shared_ptr<PluginLibrary> library;
      try {
        library = load_library(file);
      } catch (const PluginLoadError& e) {
        if (keep_going_) {
          unusable_.push_back({file, e.what()});
          continue;
        }
        // A stale binary in a shared directory stops runs that never name it: say why and how out.
        throw PluginLoadError(std::string(e.what()) + " Every .so in a plugin directory is loaded, whether the run " +
                              "uses it or not: fix this file or move it out of " + dir.path.string() + " (from " +
                              dir.origin + "). `host plugins list` shows which files on the path load and which do not.");
      }
      add_components(library, level, file);
      libraries_.push_back(std::move(library));
    }
  }
}

std::shared_ptr<PluginLibrary> Registry::load_file(const std::filesystem::path& file) {
  for (const auto& loaded : libraries_)
    if (std::filesystem::equivalent(loaded->path(), file)) return loaded;
  require_secure_plugin_path(file, allow_insecure_);
  auto library = load_library(file);
  add_components(library, 0, file);
  libraries_.push_back(library);
  return library;
}

std::shared_ptr<PluginLibrary> Registry::load_library(const std::filesystem::path& file) const {
  return loader_ ? loader_(file) : PluginLibrary::load(file, host_);
}

void Registry::add_components(const std::shared_ptr<PluginLibrary>& library, std::size_t level,
                              const std::filesystem::path& file) {
  // The file this registry asked for: a shared loader may hand back a library first loaded
  // through another path to the same file (a link).
  const std::string stem = file.stem().string();
  if (library->name() != stem)
    throw PluginLoadError("plugin " + file.string() + " calls itself '" + library->name() +
                          "' but its file is named '" + stem + ".so'; the file name must equal the plugin name "
                          "(rename the file or the TP_DEFINE_PLUGIN name).");
  for (const ComponentInfo& info : library->components()) {
    auto it = components_.find(info.id);
    if (it == components_.end()) {
      components_.emplace(info.id, Slot{{&info, library}, level, file});
      continue;
    }
    const std::string other = it->second.file.string();
    if (it->second.level == level)
      throw PluginLoadError("component id '" + info.id + "' is defined twice: in " + other + " and in " +
                            file.string() + ". Remove one of the files or rename the component.");
    // Lower level = higher precedence, already in place: this one is shadowed.
    host_.logger().warn("component '" + info.id + "' from " + file.string() + " is shadowed by " +
                        other + " (higher in the plugin search path).");
  }
}

ComponentEntry Registry::find(const std::string& id, int32_t kind, const std::string& key_path) const {
  auto it = components_.find(id);
  if (it != components_.end() && it->second.entry.info->kind == kind) return it->second.entry;
  std::vector<std::string> same_kind;
  for (const auto& [name, slot] : components_)
    if (slot.entry.info->kind == kind) same_kind.push_back(name);
  std::string message = key_path + ".component: ";
  if (it != components_.end()) {
    message += "'" + id + "' is a " + kind_name(it->second.entry.info->kind) + ", not a " + kind_name(kind) + ".";
  } else {
    message += "no " + std::string(kind_name(kind)) + " component '" + id + "' is loaded.";
    const std::string guess = closest_key(id, same_kind);
    if (!guess.empty()) message += " Did you mean '" + guess + "'?";
  }
  std::string known;
  for (const auto& name : same_kind) known += (known.empty() ? "" : ", ") + name;
  message += " Known " + std::string(kind_name(kind)) + "s: " + (known.empty() ? "(none)" : known) +
             ". Run `host plugins list` to see every component and the plugin search path.";
  throw ConfigError(key_path + ".component", message);
}

std::vector<ComponentEntry> Registry::all() const {
  std::vector<ComponentEntry> out;
  for (const auto& [id, slot] : components_) out.push_back(slot.entry);
  return out;
}

}  // namespace tp
