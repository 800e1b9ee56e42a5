// Process-level settings the host owns (ARCH-17): the device, glibc malloc thresholds, LibTorch's
// intra-op thread count, determinism, cuDNN autotuning and TF32. Applied once at start-up by
// apply_process_settings, explicitly, and reported in the log, never as hidden global side
// effects of a library call.
#pragma once

#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "tp/framework/config/run_config.h"
#include "tp/framework/util/log.h"

namespace tp {

/// Resolves "auto" | "cpu" | "cuda" | "cuda:N". "auto" picks CUDA when LibTorch sees a GPU.
/// Throws ConfigError (key run.device) when CUDA is asked for but unavailable or N is out of range.
c10::Device resolve_device(const std::string& spec);

/// Why the device `spec` ("cuda", "cuda:N"; spelled as parse_device accepts) cannot be used on
/// this host, e.g. "this host sees no CUDA device (...)"; empty when it can, and for "cpu" and
/// "auto". resolve_device's check, for callers that go on without that device (host profile
/// --devices gives it a not-run row).
std::string device_unavailable_reason(const std::string& spec);

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
/// faults) and sets LibTorch's intra-op threads to `requested` or, when 0, to this process's share
/// of the node's cores (cores / `ranks_on_node`) less `loader_threads`, at least 1, so that loader
/// and compute threads, and the ranks of one node, do not oversubscribe the cores (N ranks each
/// taking every core made a step 5x slower).
CpuSettings apply_cpu_settings(int requested_threads, int loader_threads, int ranks_on_node = 1);

/// What apply_process_settings set, for the log.
struct ProcessSettings {
  CpuSettings cpu;
  std::string determinism;           ///< apply_determinism's line
  std::vector<std::string> warnings; ///< settings the config asked for and did not get, and why
  /// Logs the lines above: the settings at INFO, the warnings at WARN.
  void report(Logger& log) const;
};

/// ARCH-17 in one function, called once by every command that runs a model (through the host's
/// assemble_run), before any component is created: the intra-op threads and malloc thresholds
/// (apply_cpu_settings, run.threads, data.num_workers, `ranks_on_node`), determinism
/// (run.deterministic), cuDNN autotuning (run.cudnn_benchmark, off under run.deterministic) and
/// TF32 (run.tf32), each switch set on or off explicitly so that nothing depends on what ran
/// before in this process.
ProcessSettings apply_process_settings(const RunConfig& config, c10::Device device, int ranks_on_node);

}  // namespace tp
