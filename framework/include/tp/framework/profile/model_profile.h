// Model profiling (`host profile`): size, FLOPs and inference latency of one model component on
// one batch, per device and precision. See docs/profiling.md for the fields and how FLOPs are
// counted.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/amp/precision.h"
#include "tp/framework/data/sample_source.h"
#include "tp/framework/plugin/plugin_instance.h"
#include "tp/framework/profile/flop_counter.h"
#include "tp/framework/profile/latency.h"

namespace tp {

class ModelProxy;

/// What to measure.
struct ProfileOptions {
  std::vector<c10::Device> devices{c10::Device(c10::kCPU)};
  std::vector<Precision> precisions{Precision::Fp32};
  /// Devices asked for that this host cannot use (`--devices cuda` without a GPU): the name as
  /// asked and why. Each gets a not-run row per precision, after the devices that ran.
  std::vector<std::pair<std::string, std::string>> unavailable;
  int64_t iterations = 50; ///< timed forward passes per (device, precision)
  int64_t warmup = 10;     ///< untimed forward passes before them
  /// The mode the model is left in (the ABI cannot ask a model for its mode): true, as models
  /// come out of create(). Profiling itself runs in eval mode.
  bool leave_training = true;
};

/// Parameter and buffer counts and sizes.
struct ModelSize {
  int64_t parameters = 0;
  int64_t trainable = 0;
  int64_t buffer_elements = 0;
  int64_t bytes = 0; ///< parameters + buffers, in their current dtypes
};

/// Inference latency of one (device, precision).
struct LatencyEntry {
  std::string device;    ///< "cpu", "cuda:0"
  std::string precision; ///< "fp32", "bf16", "fp16"
  LatencyStats batch;    ///< per batch, ms
  double sample_mean_ms = 0.0; ///< batch.mean_ms / batch size
  double samples_per_s = 0.0;
  double peak_memory_mb = 0.0; ///< accelerator: peak allocated during the timing; CPU: process peak RSS
  std::string error;     ///< non-empty when this combination could not run (the rest still ran)
};

/// Everything `host profile` reports.
struct ModelProfile {
  std::string model;        ///< component id
  int64_t batch_size = 0;
  std::string input_source; ///< "examples" (declared example inputs) or "dataset" (first samples)
  std::vector<std::pair<std::string, std::vector<int64_t>>> inputs; ///< field -> batch shape
  ModelSize size;
  int64_t checkpoint_bytes = 0; ///< a model-only checkpoint written by save_checkpoint
  int64_t flops_per_batch = 0;  ///< fp32 inference forward on the first device
  std::vector<OpFlops> flops_by_op;
  std::vector<LatencyEntry> latency;

  double flops_per_sample() const { return batch_size > 0 ? double(flops_per_batch) / double(batch_size) : 0.0; }
  /// Multiply-accumulates: FLOPs / 2 (every counted op is a sum of products).
  double macs_per_batch() const { return double(flops_per_batch) / 2.0; }
  double macs_per_sample() const { return flops_per_sample() / 2.0; }
};

/// Counts, sizes and times of `state` alone (no plugin calls).
ModelSize measure_size(const std::vector<StateTensor>& state);

/// Bytes on disk of a checkpoint holding `state` (and `config_toml`) but no optimizer state:
/// written with save_checkpoint to a temporary file, stat'ed and removed. A training checkpoint
/// adds the optimizer's per-parameter state (SGD momentum: 1x the parameters, Adam: 2x).
int64_t checkpoint_size_bytes(const std::vector<StateTensor>& state, const std::string& config_toml);

/// FLOPs of one inference-mode forward of `model` on `batch` (already on the model's device).
/// Reads only: the model's parameters, buffers, mode and device are untouched, so put it in
/// eval mode first if its training-mode forward changes buffers (batch-norm statistics).
std::pair<int64_t, std::vector<OpFlops>> count_forward_flops(ModelProxy& model, const NamedTensors& batch);

/// Profiles `model` on `cpu_batch` (CPU tensors, batch dimension first): size, checkpoint size,
/// FLOPs (fp32, first device), latency for every device x precision. The model runs in eval mode
/// under inference mode; afterwards it is back on the device it started on, in the mode
/// options.leave_training says, with the same parameter and buffer values. A device or precision
/// that cannot run (options.unavailable, a device the model cannot move to, fp16 on an old GPU)
/// gets an `error` entry, the rest still runs.
ModelProfile profile_model(ModelProxy& model, const NamedTensors& cpu_batch, const ProfileOptions& options,
                           const std::string& config_toml = "");

}  // namespace tp
