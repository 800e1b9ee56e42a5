#include "tp/framework/engine/run_switches.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <sstream>
#include <string>

#include "tp/framework/util/atomic_file.h"

namespace tp {

void apply_run_switches(const RunConfig& config, c10::Device device, Precision precision, int world_size,
                        Logger& log, const std::filesystem::path& runtime_toml, const std::string& provenance) {
  auto& context = at::globalContext();
  const bool benchmark = config.run.cudnn_benchmark && !config.run.deterministic;
  if (config.run.cudnn_benchmark && config.run.deterministic)
    log.warn("run.cudnn_benchmark is ignored because run.deterministic = true (autotuning picks "
             "algorithms by timing, which is not reproducible)");
  context.setBenchmarkCuDNN(benchmark);
  context.setAllowTF32CuBLAS(config.run.tf32);
  context.setAllowTF32CuDNN(config.run.tf32);
  if (runtime_toml.empty()) return;
  std::ostringstream text;
  text << "# Effective runtime settings of this run (written by the host; informational).\n"
       << "device = \"" << device.str() << "\"\n"
       << "precision = \"" << to_string(precision) << "\"\n"
       << "world_size = " << world_size << "\n"
       << "intra_op_threads = " << at::get_num_threads() << "\n"
       << "deterministic = " << (context.deterministicAlgorithms() ? "true" : "false") << "\n"
       << "channels_last = " << (config.run.channels_last ? "true" : "false") << "\n"
       << "cudnn_benchmark = " << (benchmark ? "true" : "false") << "\n"
       << "tf32 = " << (config.run.tf32 ? "true" : "false") << "\n"
       << "non_blocking_copies = " << (device.is_cuda() ? "true" : "false") << "\n"
       << "activation_checkpointing = " << (config.activation_checkpointing ? "true" : "false") << "\n"
       << "freeze_bn_stats = " << (config.freeze_bn_stats ? "true" : "false") << "\n"
       << "libtorch = \"" << TORCH_VERSION << "\"\n";
  if (!provenance.empty()) text << "\n" << provenance;
  write_file_atomically(runtime_toml, text.str());
}

}  // namespace tp
