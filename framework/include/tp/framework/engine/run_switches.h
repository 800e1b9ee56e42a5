// The process-wide speed switches of a run (run.cudnn_benchmark, run.tf32), set explicitly on or
// off so nothing depends on what ran before in this process, and recorded in runtime.toml.
#pragma once

#include <c10/core/Device.h>

#include <filesystem>
#include <string>

#include "tp/framework/amp/precision.h"
#include "tp/framework/config/run_config.h"
#include "tp/framework/util/log.h"

namespace tp {

/// [main] Sets cuDNN autotuning (off under run.deterministic, with a warning) and TF32 on the
/// global context. With a non-empty `runtime_toml` also writes the effective settings there
/// (device, precision, world size, threads, switches, LibTorch version; informational), followed
/// by `provenance` (TOML text, engine/provenance.h), and returns that text (the trainer appends
/// what it learns later, such as run.cuda_graphs' choice, and writes the file again).
std::string apply_run_switches(const RunConfig& config, c10::Device device, Precision precision, int world_size,
                        Logger& log, const std::filesystem::path& runtime_toml, const std::string& provenance = "");

}  // namespace tp
