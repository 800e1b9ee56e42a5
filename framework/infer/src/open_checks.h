// The checks and warnings of Model::open that read no model state (model.cpp opens with them).
#pragma once

#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "export_file.h"
#include "tp/framework/plugin/registry.h"
#include "tp/framework/util/log.h"
#include "tp/infer/model.h"

namespace tp::infer::detail {

/// OpenOptions::device as a device: Error BadInput for a name that is no CPU or CUDA device, Setup
/// for CUDA where this LibTorch has none or no GPU is visible, or a GPU index past those visible.
c10::Device device_of(const std::string& name);

/// Error BadInput for a thread count below 0 or of 1024 or more (OpenOptions::threads).
void check_threads(int threads);

/// Whether a library of `loaded` provides the component `id`.
bool provides(const std::vector<ComponentEntry>& loaded, const std::string& id);

/// OpenOptions::plugin_dirs as one list for messages: "a, b".
std::string searched_dirs(const OpenOptions& options);

/// Warnings at open, through the host table's log (TORCHHOST_INFER_LOG_LEVEL): a plugin file other
/// than the one the run trained with (it may build another network or preprocess otherwise while
/// the weights still load), and a preprocessing component no library provides (run_files and
/// run_encoded would fail on their first call; run_tensor needs none). `model` and
/// `preprocessing` are the export's component ids ("" without preprocessing).
void warn_about_plugins(Logger& log, const std::vector<ComponentEntry>& loaded, const std::string& model,
                        const std::string& preprocessing, bool preprocessing_loaded,
                        const std::vector<ExportedPluginFile>& trained_files, const std::string& export_file,
                        const std::string& searched);

}  // namespace tp::infer::detail
