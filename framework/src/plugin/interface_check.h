// Registration-time checks of a component's interface table (ARCH-4: required functions
// are checked once, when the plugin loads, not on every call).
#pragma once

#include <string>

#include "tp/framework/plugin/plugin_library.h"

namespace tp {

/// Throws PluginLoadError naming `file` and the component when the table is missing, its
/// struct_size is smaller than the ABI 1 table, or a required function pointer is NULL.
void check_interface_table(const ComponentInfo& info, const std::string& file);

}  // namespace tp
