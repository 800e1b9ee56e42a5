// `host plugins check FILE.so`: exercises every component of a loaded library the way a run
// would, with default options, so a plugin author finds contract violations before a user does.
#pragma once

#include <string>
#include <vector>

#include "tp/framework/plugin/plugin_library.h"

namespace tp {

/// One line of the report.
struct CheckLine {
  std::string component;
  bool ok;
  std::string what;
};

/// Checks each component of `library`: schema defaults validate; create/destroy with defaults
/// (skipped, not failed, when a key is required); destroy(NULL) is safe; datasets return a
/// sample twice identically; models run forward + backward on a dummy batch built from their
/// declared examples and give every trainable parameter a gradient; metrics expose state;
/// callbacks accept an event. Never throws for plugin faults: they become failed lines.
std::vector<CheckLine> check_library(const std::shared_ptr<PluginLibrary>& library);

}  // namespace tp
