// runtime.toml: the settings a training run actually ran with, beside the config.toml it was asked
// for (docs/outputs.md). Engine-private: the Trainer writes it at start-up.
#pragma once

#include <c10/core/Device.h>

#include <filesystem>
#include <string>

#include "tp/framework/amp/precision.h"
#include "tp/framework/config/run_config.h"

namespace tp {

/// runtime.toml's text: the effective settings (device, precision, world size, intra-op threads,
/// determinism, cuDNN autotuning and TF32 as the global context holds them after
/// apply_process_settings, LibTorch version, the GPU; informational). The trainer's RuntimeRecord
/// adds the provenance (engine/setup/provenance.h) and what it learns later (data.decode's and
/// run.cuda_graphs' choices) and writes the file once the run has started (Trainer::record_runtime).
std::string runtime_toml_text(const RunConfig& config, c10::Device device, Precision precision, int world_size);

}  // namespace tp
