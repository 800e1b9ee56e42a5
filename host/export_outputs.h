// `torchhost.outputs` of an export (docs/predict.md, "Export"): the names, shapes and meaning of
// the model's outputs, measured by building the model from the checkpoint's config through its
// plugin and running it once, in eval mode on the CPU, on the example inputs its descriptor
// declares (what `host plugins check` and `host profile` run it on).
#pragma once

#include <string>

#include "cli.h"
#include "tp/framework/checkpoint/checkpoint.h"

namespace tp::cli {

/// What the model of `checkpoint` outputs, as JSON text: {"<name>": {"shape": ["N", ...],
/// "dtype": "float32", "meaning": "..."}} in the order the model returns them, with a
/// classification output ("logits" or "*_logits", [N, C]) explained against torchhost.classes.
/// Dimensions past the batch are those measured on the declared example input, except a per-pixel
/// output's last two (tp::is_pixel_map, as host predict tells them: its H and W are the input
/// image's), written "H" and "W" with a meaning; a ragged output (with "<name>_offsets") has "rows"
/// for its first. The plugin comes from the search path `options` and the checkpoint's
/// config give, as for `host predict`. Returns "" and sets `why_not` when it cannot be known: the
/// model's plugin is not on the search path, or the model declares no example inputs.
std::string model_outputs_json(const Options& options, const LoadedCheckpoint& checkpoint, std::string& why_not);

}  // namespace tp::cli
