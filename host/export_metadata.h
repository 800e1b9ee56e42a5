// What `host export` writes into the exported file's safetensors `__metadata__` besides the
// weights, so that a deployment can reproduce `host predict` from the file alone (docs/predict.md,
// "Export"): the model component and its options, the class names, the outputs, the evaluation
// preprocessing and the plugins with their hashes. Everything comes from the checkpoint (its
// resolved config, provenance and class names); nothing else of the config is copied, so a
// tracking URI's password or any other table never reaches the file.
#pragma once

#include <map>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

namespace tp::cli {

/// The `torchhost.*` entries of an export of `checkpoint`, values JSON text (UTF-8):
///   torchhost.model          {"component": id, "options": {the [model] table without component}}
///   torchhost.classes        ["cat", "dog", ...] (only when the checkpoint holds class names)
///   torchhost.class_field    the label field the names belong to (with classes)
///   torchhost.preprocessing  {"split", "table", "component", "options", "decode", ...}: the table
///                            the evaluation split was read with (data.val, else data.test, else
///                            data.train), fast_decode's reduced-scale JPEG decode spelled out
///   torchhost.plugin_files   [{"library", "sha256", "components"}] from the checkpoint's
///                            provenance (absent in checkpoints written before it)
/// Strings are passed through redact_uri_credentials. Throws tp::Error when the checkpoint's
/// config cannot be parsed (a damaged checkpoint passed its seal only if written so).
std::map<std::string, std::string> deployment_metadata(const LoadedCheckpoint& checkpoint);

/// The metadata format version this host writes as `torchhost.format`: raised when a key changes
/// its meaning or is removed (new keys keep it), so a reader can refuse or adapt to another one.
inline constexpr int kExportFormat = 1;

/// Which build wrote the export, plain text (not JSON), for a deployment record:
///   torchhost.version     the host's version, `git describe` at build time (`host --version`)
///   torchhost.libtorch    the LibTorch version it was built with
///   torchhost.plugin_abi  the plugin ABI it speaks, "major.minor"
///   torchhost.format      kExportFormat
std::map<std::string, std::string> writer_metadata();

}  // namespace tp::cli
