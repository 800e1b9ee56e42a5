// A plugin is code that runs with the user's rights, so a plugin file (or the directory it sits
// in) that someone else could have replaced is refused, the way ssh refuses a group-writable
// authorized_keys. Checked before dlopen, for every directory and file the registry loads.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace tp {

/// Why `path` (a plugin file or directory) is unsafe to load code from, or nothing when it is
/// fine: it must be owned by the current user or root and must not be writable by group or
/// others (a directory with the sticky bit, like /tmp, is still refused: others can add files).
/// Every directory above it (of the real path: symbolic links are followed, the target is
/// checked) must be owned by the user or root and, when group or others may write it, carry the
/// sticky bit; else its entries, the plugin's directory among them, could be renamed and replaced.
/// Cost: one stat per path component.
std::optional<std::string> insecure_plugin_path_reason(const std::filesystem::path& path);

/// Throws tp::PluginLoadError naming `path`, the reason and the way out
/// (--allow-insecure-plugin-dir) when `allow_insecure` is false and the path is unsafe.
void require_secure_plugin_path(const std::filesystem::path& path, bool allow_insecure);

}  // namespace tp
