// What a file given as a checkpoint is when it is a readable PyTorch file but no torchhost
// checkpoint: a plain state_dict, a timm train.py or Lightning checkpoint. --resume and
// `host eval --checkpoint` users coming from those tools hand such files over (migration trial,
// finding 5), and deserve to hear what the file is and how to use its weights, not "damaged" and
// a LibTorch INTERNAL ASSERT. Internal to framework/src/checkpoint.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tp {

/// The message for `bytes` (named `name`; already through verify_checkpoint and
/// check_torch_layout) when python_pickle.h's reader reads it and it has no torchhost "format"
/// entry: one paragraph saying what the file is (a plain state_dict; a Lightning, timm or other
/// checkpoint with its weights under "state_dict" or "model"; else its top-level keys), that
/// --resume/--checkpoint need a torchhost checkpoint, and how train.init_weights (with
/// train.init_weights_prefix when all its names share a first part) starts a run from its
/// weights. nullopt when the file does not read or claims the torchhost format (a damaged
/// checkpoint). Never throws.
std::optional<std::string> foreign_checkpoint_note(const std::vector<char>& bytes, const std::string& name);

}  // namespace tp
