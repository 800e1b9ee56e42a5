#include "tp/framework/config/install_layout.h"

#include <system_error>

// Both are set by framework/CMakeLists.txt from the top-level CMakeLists.txt, which installs the
// plugins and configs there; the fallbacks only serve a compile outside CMake.
#ifndef TP_INSTALL_PLUGIN_DIR
#define TP_INSTALL_PLUGIN_DIR "lib/torchhost/plugins"
#endif
#ifndef TP_INSTALL_CONFIG_DIR
#define TP_INSTALL_CONFIG_DIR "share/torchhost/configs"
#endif

namespace tp {

std::filesystem::path executable_dir() {
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::filesystem::path() : exe.parent_path();
}

std::filesystem::path builtin_plugin_dir_of(const std::filesystem::path& exe_dir) {
  if (exe_dir.empty()) return {};
  std::error_code error;
  std::filesystem::path installed = (exe_dir / ".." / TP_INSTALL_PLUGIN_DIR).lexically_normal();
  if (std::filesystem::is_directory(installed, error)) return installed;
  return (exe_dir / ".." / "plugins").lexically_normal();
}

std::string reference_config_of(const std::filesystem::path& exe_dir) {
  if (!exe_dir.empty()) {
    std::error_code error;
    const std::filesystem::path installed =
        (exe_dir / ".." / TP_INSTALL_CONFIG_DIR / "reference.toml").lexically_normal();
    if (std::filesystem::is_regular_file(installed, error)) return installed.string();
  }
  return "configs/reference.toml";
}

std::string reference_config() { return reference_config_of(executable_dir()); }

}  // namespace tp
