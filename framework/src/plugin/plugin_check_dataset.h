// The dataset part of `host plugins check` (plugin_check.h), apart because it drives the raw
// tp.dataset/1 table: the proxy the loader uses turns fields into tensors at once, and the checker
// must see each DLPack field as the plugin handed it over (a NULL deleter, a shape that differs).
#pragma once

#include <string>

#include "tp/framework/config/run_config.h"
#include "tp/framework/plugin/plugin_check.h"
#include "tp/framework/plugin/registry.h"

namespace tp::detail {

/// Creates the dataset `entry` on "train" (with `train`) and "val" (with `val`), reads samples
/// as plugin_check.h describes, destroys both. Returns the summary; throws tp::Error whose
/// message names the call, the split and the sample index of the first violation.
std::string check_dataset(const ComponentEntry& entry, const ComponentConfig& train, const ComponentConfig& val,
                          const CheckOptions& options);

}  // namespace tp::detail
