// The files an export makes its model load (security trial F5). An export is taken for data, but
// its torchhost.model names the component and its options, and an option of type TP_CFG_PATH
// names a file the component loads: org.torchhost.torchscript's `path` is a TorchScript program,
// code this process runs, which can read any file the process can and return it as an output. A
// lone .safetensors file must not make the library run code from elsewhere on the machine.
#pragma once

#include <string>
#include <vector>

#include "tp/framework/config/run_config.h"
#include "tp/framework/config/schema.h"
#include "tp/framework/util/log.h"

namespace tp::infer::detail {

/// Checks every path key of `schema` (KeySpec::is_path) that the validated model table `config`
/// sets: a file outside the directory of `export_file` (after links are resolved: a link beside
/// the export to elsewhere is elsewhere) is refused, Error of kind Setup naming the file, the key
/// and OpenOptions::allow_files_outside_export, unless `allow_outside`. Each file the model will
/// load is logged with its SHA-256: info when it lies beside the export, a warning when outside.
/// Paths and values are the export's: printed escaped.
void check_model_files(const ComponentConfig& config, const std::vector<KeySpec>& schema, const std::string& export_file,
                       bool allow_outside, Logger& log);

}  // namespace tp::infer::detail
