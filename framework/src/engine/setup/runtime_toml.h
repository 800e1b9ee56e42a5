// runtime.toml: the settings a training run actually ran with, beside the config.toml it was asked
// for (docs/outputs.md). Engine-private: the Trainer writes it at start-up.
#pragma once

#include <c10/core/Device.h>

#include <filesystem>
#include <string>

#include "tp/framework/amp/precision.h"
#include "tp/framework/config/run_config.h"

namespace tp {

/// [rank 0] Writes `path` atomically with the effective settings (device, precision, world size,
/// intra-op threads, determinism, cuDNN autotuning and TF32 as the global context holds them
/// after apply_process_settings, LibTorch version, the GPU; informational), followed by
/// `provenance` (TOML text, engine/setup/provenance.h), and returns that text (the trainer appends what
/// it learns later, such as run.cuda_graphs' choice, and writes the file again).
std::string write_runtime_toml(const RunConfig& config, c10::Device device, Precision precision, int world_size,
                               const std::filesystem::path& path, const std::string& provenance = "");

}  // namespace tp
