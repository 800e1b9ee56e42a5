#include <cstdio>

#include "commands.h"
#include "export_metadata.h"
#include "export_outputs.h"
#include "weights_choice.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/checkpoint/safetensors.h"
#include "tp/framework/error.h"
#include "tp/framework/util/output_target.h"

namespace tp::cli {

int run_export(const Options& options) {
  if (!options.format.empty() && options.format != "safetensors")
    throw ConfigError("--format", "host export: --format must be safetensors (got '" + options.format + "').");
  check_output_file(options.output, "--output", "exported weights"); // never a device, a FIFO or a directory
  const LoadedCheckpoint checkpoint = load_checkpoint(options.checkpoint);
  std::map<std::string, std::string> metadata{{"format", "pt"},
                                              {"torchhost.epoch", std::to_string(checkpoint.epoch)},
                                              {"torchhost.step", std::to_string(checkpoint.step)}};
  std::string plugins;
  for (const auto& p : checkpoint.plugins) plugins += (plugins.empty() ? "" : ",") + p;
  metadata["torchhost.plugins"] = plugins;
  // By default the weights the run monitored (weights_choice.h), as host eval.
  const ChosenWeights chosen = choose_weights(options.weights, checkpoint);
  if (!chosen.note.empty()) std::printf("%s\n", chosen.note.c_str());
  metadata["torchhost.weights"] = chosen.name;
  // What a deployment needs to reproduce `host predict` from this file alone (export_metadata.h).
  metadata.merge(deployment_metadata(checkpoint));
  metadata.merge(writer_metadata()); // which host, LibTorch and plugin ABI wrote it; the format version
  std::string why_no_outputs;
  if (std::string outputs = model_outputs_json(options, checkpoint, why_no_outputs); !outputs.empty())
    metadata["torchhost.outputs"] = std::move(outputs);
  else
    std::printf("torchhost.outputs is not written: %s\n", why_no_outputs.c_str());
  const NamedWeights& weights = checkpoint.weights(chosen.name, "--weights");
  write_safetensors(options.output, weights, metadata);
  std::printf("exported %zu tensors (%s weights) from %s to %s\n", weights.size(), chosen.name.c_str(),
              options.checkpoint.c_str(), options.output.c_str());
  return kExitOk;
}

}  // namespace tp::cli
