// Process-level settings the host owns (ARCH-17): the device, glibc malloc
// thresholds and LibTorch's intra-op thread count. Applied once at start-up, explicitly, and
// reported in train.log — never as hidden global side effects of a library call.
#pragma once

#include <c10/core/Device.h>

#include <string>

namespace tp {

/// Resolves "auto" | "cpu" | "cuda" | "cuda:N". "auto" picks CUDA when LibTorch sees a GPU.
/// Throws ConfigError (key run.device) when CUDA is asked for but unavailable or N is out of range.
c10::Device resolve_device(const std::string& spec);

/// run.deterministic: deterministic algorithms only (an op without one raises), cuDNN
/// deterministic with benchmarking off, and CUBLAS_WORKSPACE_CONFIG=:4096:8 on CUDA (unless the
/// user set it). Returns a line for the log. Without it nothing is changed.
std::string apply_determinism(bool deterministic, const c10::Device& device);

/// What apply_cpu_settings did, for the log.
struct CpuSettings {
  int intra_op_threads = 1;
  int loader_threads = 0;
  int cores = 1;
  bool malloc_tuned = false;
  std::string describe() const;
};

/// Raises glibc's mmap and trim thresholds (a small CNN step went from 44 ms to 10 ms on this
/// kind of machine: the default returns freed activations to the OS every step, costing page
/// faults) and sets LibTorch's intra-op threads to `requested` or, when 0, to the cores left
/// after `loader_threads` (at least 1), so loader and compute threads do not oversubscribe.
CpuSettings apply_cpu_settings(int requested_threads, int loader_threads);

}  // namespace tp
