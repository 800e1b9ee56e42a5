// train.init_weights: start a run from weights made elsewhere, so an external oracle (a Python
// reimplementation, another framework) and the host train from the very same starting point.
//
// Accepted files, told apart by their content:
//   - a host checkpoint (checkpoints/*.pt): its "model" entry;
//   - Python's `torch.save(model.state_dict(), path)`, or `torch.save({"model": state_dict}, path)`;
//   - a .safetensors file (`safetensors.torch.save_file(model.state_dict(), path)`, or `host export`).
// Matching is strict, like `load_state_dict(strict=True)`: every parameter and buffer of the model
// must be in the file under its name with its shape, and the file must hold nothing else. Values
// are converted to the model tensor's dtype and device.
#pragma once

#include <filesystem>
#include <vector>

#include "tp/framework/plugin/plugin_instance.h"

namespace tp {

/// Reads `file` and copies each named tensor into the model tensor of the same name in
/// `model_state` (parameters and buffers, as ModelProxy::state() lists them), under no-grad.
/// Nothing is copied unless every name and shape matches. Throws ConfigError (train.init_weights)
/// naming the file for an unreadable or unrecognised file, and for missing, unexpected or
/// mis-shaped names (the first few of each). [main]
/// Example:
///   load_initial_weights("init.pt", parts.model->state());
void load_initial_weights(const std::filesystem::path& file, const std::vector<StateTensor>& model_state);

}  // namespace tp
