// train.init_weights: start a run from weights made elsewhere, so an external oracle (a Python
// reimplementation, another framework) and the host train from the very same starting point.
//
// Accepted files, told apart by their content:
//   - a host checkpoint (checkpoints/*.pt): its "model" entry;
//   - Python's `torch.save(model.state_dict(), path)`, or `torch.save({"model": state_dict}, path)`;
//   - a timm train.py or Lightning checkpoint: its "state_dict" entry (what else it holds, such as
//     optimizer state, timm's args or Lightning's callbacks, is stepped over unread and never run);
//   - a .safetensors file (`safetensors.torch.save_file(model.state_dict(), path)`, or `host export`).
// Matching is strict, like `load_state_dict(strict=True)`: every parameter and buffer of the model
// must be in the file under its name with its shape, and the file must hold nothing else. Values
// are converted to the model tensor's dtype and device. `train.init_weights_ignore` names what to
// leave out on both sides (fine-tuning: a new classifier head with another class count keeps the
// model's own init), and only that. `train.init_weights_prefix` reads only the file's names under a
// prefix, with the prefix removed: a Lightning module's "model.", DDP's "module.", a backbone's
// "backbone." inside a bigger network.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tp/framework/plugin/plugin_instance.h"

namespace tp {

/// What load_initial_weights did: the model tensors it filled and the names it left out.
struct InitialWeightsReport {
  int64_t loaded = 0;                      ///< model tensors copied from the file
  std::vector<std::string> kept_model;     ///< model names `ignore` left with their own init
  std::vector<std::string> ignored_file;   ///< file names `ignore` left unread (after the prefix's removal)
  int64_t outside_prefix = 0;              ///< file names without `prefix`, left unread
};

/// Reads `file` and copies each named tensor into the model tensor of the same name in
/// `model_state` (parameters and buffers, as ModelProxy::state() lists them), under no-grad.
/// Names matching any of the `ignore` globs (fnmatch, `*` crosses dots) are left out on both
/// sides. Nothing is copied unless every other name and shape matches. The file is untrusted: it
/// is read once, and a zip gets the checkpoint reader's checks (seal, zip bounds, archive layout,
/// pickle lengths, every tensor inside its storage record). Throws CheckpointError (exit 4)
/// naming train.init_weights and the file for a damaged or hostile zip; ConfigError
/// (train.init_weights) naming the file for an unreadable or unrecognised file, and for missing,
/// unexpected or mis-shaped names (the first few of each); ConfigError
/// (train.init_weights_ignore[i]) for a glob that matches no name in the model or the file. A
/// non-empty `prefix` reads only the file's names that begin with it, without it, before `ignore`
/// applies; ConfigError (train.init_weights_prefix) when no name begins with it. A mismatch where
/// every missing model name is in the file under one prefix names that prefix in its message. [main]
/// Example:
///   const InitialWeightsReport report = load_initial_weights("init.pt", parts.model->state(), {"fc.*"});
///   load_initial_weights("lightning.ckpt", parts.model->state(), {}, "model.");
InitialWeightsReport load_initial_weights(const std::filesystem::path& file, const std::vector<StateTensor>& model_state,
                                          const std::vector<std::string>& ignore = {}, const std::string& prefix = "");

}  // namespace tp
