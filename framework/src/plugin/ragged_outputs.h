// The check of a model's ragged outputs at the plugin boundary (docs/hardening.md, "Ragged
// outputs"; plugin_api/README.md, "Variable-size fields"): every `<name>_offsets` a model returns
// beside a `<name>` is validated before a loss, a metric, a callback or a prediction writer reads
// it, so an offset past the rows can never become an out-of-bounds read or write in one of them.
#pragma once

#include <cstdint>
#include <string>

#include "tp/framework/data/named_tensors.h"

namespace tp::detail {

/// Throws tp::PluginError (component `component_id`, function "forward") naming `who` (the model)
/// and the field unless, for every output
/// `<name>_offsets` whose `<name>` is also an output: the offsets are a 1-D int64 tensor of at
/// least one entry on `<name>`'s device, `<name>` has at least one dimension, and the values start
/// at 0, never decrease and end at `<name>`'s row count (size(0)), and there are `batch_size` + 1
/// of them (when `batch_size` >= 0: the batch the model was given, batch_size_of its inputs; a
/// monotone list of another length passed before and cut or padded the samples). Reads the offsets on the host
/// (one small copy per distinct offsets tensor, a device sync on a GPU), except while the current
/// CUDA stream is being captured into a graph, where only dtype, shape and device are checked.
void check_ragged_outputs(const NamedTensors& outputs, int64_t batch_size, const std::string& component_id,
                          const std::string& who);

/// The batch size B of a model's `inputs`: B + 1 less one of the first `<name>_offsets` input (a
/// ragged field's), else size(0) of the first input of at least one dimension that has no offsets
/// beside it; -1 when no input says (no inputs, only scalars).
int64_t batch_size_of(const NamedTensors& inputs);

}  // namespace tp::detail
