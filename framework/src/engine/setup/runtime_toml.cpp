#include "engine/setup/runtime_toml.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
#include <ATen/cuda/CUDAContext.h>  // device properties; needs the CUDA toolkit headers
#endif

#include <sstream>
#include <string>


namespace tp {
namespace {

/// runtime.toml's lines about the GPU this process trains on (name, compute capability, memory,
/// how many the process sees); "" on a CPU device and in a CPU build of LibTorch.
std::string gpu_lines(c10::Device device) {
#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
  if (!device.is_cuda()) return "";
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::cuda::current_device();
  const cudaDeviceProp* gpu = at::cuda::getDeviceProperties(index);
  std::string name;
  for (const char* c = gpu->name; *c != '\0'; ++c)
    if (*c != '"' && *c != '\\') name += *c; // a TOML basic string without escapes
  std::ostringstream text;
  text << "gpu_name = \"" << name << "\"\n"
       << "gpu_compute_capability = \"" << gpu->major << "." << gpu->minor << "\"\n"
       << "gpu_memory_mb = " << gpu->totalGlobalMem / 1000000 << "\n"
       << "gpu_count = " << static_cast<int>(c10::cuda::device_count()) << "\n";
  return text.str();
#else
  (void)device;
  return "";
#endif
}

}  // namespace

std::string runtime_toml_text(const RunConfig& config, c10::Device device, Precision precision, int world_size) {
  const auto& context = at::globalContext();
  std::ostringstream text;
  text << "# Effective runtime settings of this run (written by the host; informational).\n"
       << "device = \"" << device.str() << "\"\n"
       << "precision = \"" << to_string(precision) << "\"\n"
       << "world_size = " << world_size << "\n"
       << "optim_lr = " << toml::value<double>(config.optim.lr) << "\n" // after optim.lr_base's scaling
       << "intra_op_threads = " << at::get_num_threads() << "\n"
       << "deterministic = " << (context.deterministicAlgorithms() ? "true" : "false") << "\n"
       << "channels_last = " << (config.run.channels_last ? "true" : "false") << "\n"
       << "cudnn_benchmark = " << (context.benchmarkCuDNN() ? "true" : "false") << "\n"
       << "tf32 = " << (context.allowTF32CuBLAS() ? "true" : "false") << "\n"
       << "non_blocking_copies = " << (device.is_cuda() ? "true" : "false") << "\n"
       << "device_prefetch = " << (device.is_cuda() && config.data.device_prefetch ? "true" : "false") << "\n"
       << "activation_checkpointing = " << (config.activation_checkpointing ? "true" : "false") << "\n"
       << "freeze_bn_stats = " << (config.freeze_bn_stats ? "true" : "false") << "\n"
       << "libtorch = \"" << TORCH_VERSION << "\"\n"
       << gpu_lines(device);
  return text.str();
}

}  // namespace tp
