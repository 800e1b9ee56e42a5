// The check of a model's ragged outputs at the plugin boundary (docs/hardening.md, "Ragged
// outputs"; plugin_api/README.md, "Variable-size fields"): every `<name>_offsets` a model returns
// beside a `<name>` is validated before a loss, a metric, a callback or a prediction writer reads
// it, so an offset past the rows can never become an out-of-bounds read or write in one of them.
#pragma once

#include <string>

#include "tp/framework/data/named_tensors.h"

namespace tp::detail {

/// Throws tp::PluginError (component `component_id`, function "forward") naming `who` (the model)
/// and the field unless, for every output
/// `<name>_offsets` whose `<name>` is also an output: the offsets are a 1-D int64 tensor of at
/// least one entry on `<name>`'s device, `<name>` has at least one dimension, and the values start
/// at 0, never decrease and end at `<name>`'s row count (size(0)). Reads the offsets on the host
/// (one small copy per distinct offsets tensor, a device sync on a GPU), except while the current
/// CUDA stream is being captured into a graph, where only dtype, shape and device are checked.
void check_ragged_outputs(const NamedTensors& outputs, const std::string& component_id, const std::string& who);

}  // namespace tp::detail
