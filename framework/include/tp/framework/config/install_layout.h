// Where the host finds its own files, relative to its executable, so that a build tree and an
// installed product (`cmake --install build --prefix P`, moved anywhere afterwards) both work
// without a path compiled in:
//   build tree      build/bin/host    build/plugins/                  (configs/ in the source tree)
//   install         P/bin/host        P/lib/torchhost/plugins/        P/share/torchhost/configs/
// The install's sub-directories come from CMake (TP_INSTALL_PLUGIN_DIR, TP_INSTALL_CONFIG_DIR in
// the top-level CMakeLists.txt), which installs there; docs/build.md, "Installing", shows the layout.
#pragma once

#include <filesystem>
#include <string>

namespace tp {

/// The directory of the running executable (from /proc/self/exe), or an empty path when the
/// link cannot be read. Cost: one readlink.
std::filesystem::path executable_dir();

/// The built-in plugin directory of a host whose executable is in `exe_dir`: the install's
/// `<exe_dir>/../lib/torchhost/plugins` when that is a directory, else the build tree's
/// `<exe_dir>/../plugins` (which need not exist). Empty for an empty `exe_dir`. Example:
/// builtin_plugin_dir_of("/opt/th/bin") == "/opt/th/lib/torchhost/plugins" in an install.
std::filesystem::path builtin_plugin_dir_of(const std::filesystem::path& exe_dir);

/// The file that lists every host key, as messages name it: the install's
/// `<exe_dir>/../share/torchhost/configs/reference.toml` (absolute, normalised) when that file
/// exists, else "configs/reference.toml", the source tree's, relative to its root. Example:
/// "/opt/th/share/torchhost/configs/reference.toml" for an installed host.
std::string reference_config_of(const std::filesystem::path& exe_dir);

/// reference_config_of(executable_dir()): what a message about host keys tells the user to read.
std::string reference_config();

}  // namespace tp
