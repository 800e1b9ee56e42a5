#include "tp/framework/engine/runtime_setup.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "tp/framework/config/value_kinds.h"
#include "tp/framework/error.h"

namespace tp {

std::string device_unavailable_reason(const std::string& spec) {
  const DeviceSpec device = parse_device(spec, "run.device");
  if (device.type != DeviceSpec::Type::Cuda) return ""; // "auto" falls back to the CPU
  // at::hasCUDA() is false without a driver or a visible GPU, in a CUDA build too: which LibTorch
  // this is comes from the build (TP_TORCH_DEVICE_BUILD, the fingerprint's device build).
  const bool cuda_available = at::hasCUDA() && at::getNumGPUs() > 0;
  const bool cuda_build = TP_TORCH_DEVICE_BUILD == 2;
  if (!cuda_available)
    return std::string("this host sees no CUDA device (") +
           (cuda_build ? "its LibTorch is a CUDA build but finds no GPU: no NVIDIA driver, or "
                         "CUDA_VISIBLE_DEVICES hides them; nvidia-smi lists what the driver sees"
                       : "its LibTorch is a CPU-only build; a GPU needs the host built against a "
                         "CUDA LibTorch, docs/build.md") +
           ")";
  if (device.index.value_or(0) >= static_cast<int64_t>(at::getNumGPUs()))
    return "only " + std::to_string(at::getNumGPUs()) + " GPU(s) are visible";
  return "";
}

c10::Device resolve_device(const std::string& spec) {
  const bool cuda_available = at::hasCUDA() && at::getNumGPUs() > 0;
  const DeviceSpec device = parse_device(spec, "run.device");
  if (device.type == DeviceSpec::Type::Auto) return cuda_available ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  if (device.type == DeviceSpec::Type::Cpu) return c10::Device(c10::kCPU);
  if (const std::string why = device_unavailable_reason(spec); !why.empty())
    throw ConfigError("run.device", "run.device = \"" + spec + "\" but " + why +
                                        (cuda_available ? "." : ". Use run.device = \"cpu\" or \"auto\"."));
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device.index.value_or(0)));
}

std::string apply_determinism(bool deterministic, const c10::Device& device) {
  if (!deterministic) return "deterministic algorithms: off (run.deterministic = false)";
  if (device.is_cuda()) ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);
  return "deterministic algorithms: on (cuDNN deterministic, benchmark off)";
}

std::string CpuSettings::describe() const {
  return "cpu settings: " + std::to_string(cores) + " cores, intra-op threads " + std::to_string(intra_op_threads) +
         ", loader threads " + std::to_string(loader_threads) + ", malloc thresholds " +
         (malloc_tuned ? "raised (M_MMAP_THRESHOLD 256 MiB, M_TRIM_THRESHOLD 1 GiB)" : "unchanged");
}

CpuSettings apply_cpu_settings(int requested_threads, int loader_threads, int ranks_on_node) {
  CpuSettings s;
  s.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  s.loader_threads = loader_threads;
  // Keep freed tensors in the heap instead of returning them to the OS after every step.
  s.malloc_tuned = mallopt(M_MMAP_THRESHOLD, 256 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;
  const int share = s.cores / std::max(1, ranks_on_node);
  s.intra_op_threads = requested_threads > 0 ? requested_threads : std::max(1, share - loader_threads);
  at::set_num_threads(s.intra_op_threads);
  return s;
}

void ProcessSettings::report(Logger& log) const {
  log.info(cpu.describe());
  log.info(determinism);
  for (const std::string& warning : warnings) log.warn(warning);
}

ProcessSettings apply_process_settings(const RunConfig& config, c10::Device device, int ranks_on_node) {
  ProcessSettings settings;
  settings.cpu = apply_cpu_settings(static_cast<int>(config.run.threads), static_cast<int>(config.data.num_workers),
                                    ranks_on_node);
  settings.determinism = apply_determinism(config.run.deterministic, device);
  auto& context = at::globalContext();
  if (config.run.cudnn_benchmark && config.run.deterministic)
    settings.warnings.push_back("run.cudnn_benchmark is ignored because run.deterministic = true (autotuning picks "
                                "algorithms by timing, which is not reproducible)");
  context.setBenchmarkCuDNN(config.run.cudnn_benchmark && !config.run.deterministic);
  context.setAllowTF32CuBLAS(config.run.tf32);
  context.setAllowTF32CuDNN(config.run.tf32);
  return settings;
}

}  // namespace tp
