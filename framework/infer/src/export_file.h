// The parts of a `host export` file (host/export_metadata.h writes them) that serving needs: the
// model component and its options, the evaluation preprocessing, the class names, the weights.
#pragma once

#include <toml++/toml.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h"

namespace tp::infer::detail {

/// A component and its table, as the export's JSON metadata names them.
struct ExportedComponent {
  std::string component;
  toml::table options;
};

/// A plugin library the training used, as the export's torchhost.plugin_files names it.
struct ExportedPluginFile {
  std::string library; ///< file name, e.g. "resnet.so"
  std::string sha256;  ///< of its bytes when the run trained
};

struct ExportFile {
  ExportedComponent model;
  ExportedComponent preprocessing; ///< component "" when the export has no evaluation table
  std::vector<std::string> classes;
  bool sigmoid_scores = false; ///< torchhost.scores = "sigmoid": a class's probability is its own sigmoid
  std::vector<ExportedPluginFile> plugin_files; ///< empty in exports written without provenance
  std::map<std::string, std::string> metadata;  ///< every string entry of the file's "__metadata__"
  NamedWeights weights;
};

/// Reads `path`. Throws tp::infer::Error naming the file when it cannot be read, is not a
/// safetensors file, or carries no `torchhost.model` (written before issue 60, or not by `host
/// export`), saying to export again with this host.
ExportFile read_export(const std::filesystem::path& path);

}  // namespace tp::infer::detail
