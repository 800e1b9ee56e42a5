// The dataset part of `host plugins check` (plugin_check.h), apart because it drives the raw
// tp.dataset/1 table: the proxy the loader uses turns fields into tensors at once, and the checker
// must see each DLPack field as the plugin handed it over (a NULL deleter, a shape that differs).
#pragma once

#include <string>
#include <vector>

#include "tp/framework/config/run_config.h"
#include "tp/framework/plugin/plugin_check.h"
#include "tp/framework/plugin/registry.h"

namespace tp::detail {

/// What check_dataset found: one line per split, and what deserves a look without failing.
struct DatasetCheck {
  std::string summary;
  std::vector<std::string> warnings; ///< a float scalar named like a class label; a test split these options refuse
};

/// Creates the dataset `entry` on "train" (with `train`), "val" (with `val`) and, when it serves
/// one (plugin ABI >= 1.5 and create("test") not refused with TP_ERR_UNSUPPORTED), "test" (with
/// `test`); reads samples as plugin_check.h describes, destroys each. Throws tp::Error whose
/// message names the call, the split and the sample index of the first violation; samples the
/// plugin refuses (get_sample failing: a bad file) are no violation that stops the reading: the
/// error then lists every one read, each with the plugin's message, and their count.
DatasetCheck check_dataset(const ComponentEntry& entry, const ComponentConfig& train, const ComponentConfig& val,
                           const ComponentConfig& test, const CheckOptions& options);

}  // namespace tp::detail
