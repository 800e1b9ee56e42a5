#include "tp/framework/profile/model_profile.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "tp/framework/amp/autocast_guard.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/error.h"
#include "tp/framework/plugin/model_proxy.h"
#include "tp/framework/profile/memory.h"

namespace tp {
namespace {

NamedTensors on_device(const NamedTensors& batch, const c10::Device& device) {
  NamedTensors out;
  for (const auto& [name, tensor] : batch) out.emplace_back(name, tensor.to(device));
  return out;
}

/// Puts the model back where profiling found it, on every exit path.
void restore(ModelProxy& model, const c10::Device& home, bool training) {
  model.to_device(home, c10::kFloat);
  model.set_training(training);
}

LatencyEntry time_forward(ModelProxy& model, const NamedTensors& batch, const c10::Device& device,
                          Precision precision, const ProfileOptions& options, int64_t batch_size) {
  LatencyEntry entry;
  entry.device = device.str();
  entry.precision = std::string(to_string(precision));
  try {
    check_precision_supported(precision, device);
    reset_peak_memory(device);
    entry.batch = measure_latency(
        [&] {
          c10::InferenceMode inference;
          AutocastGuard autocast(device.type(), precision);
          const NamedTensors outputs = model.forward(batch);
        },
        device, options.warmup, options.iterations);
    entry.sample_mean_ms = entry.batch.mean_ms / double(batch_size);
    entry.samples_per_s = entry.batch.mean_ms > 0 ? 1000.0 * double(batch_size) / entry.batch.mean_ms : 0.0;
    entry.peak_memory_mb = peak_memory_mb(device);
  } catch (const std::exception& e) {
    entry.error = e.what();
  }
  return entry;
}

}  // namespace

ModelSize measure_size(const std::vector<StateTensor>& state) {
  ModelSize size;
  for (const auto& s : state) {
    size.bytes += s.tensor.numel() * static_cast<int64_t>(s.tensor.element_size());
    if (s.is_buffer) {
      size.buffer_elements += s.tensor.numel();
      continue;
    }
    size.parameters += s.tensor.numel();
    if (s.tensor.requires_grad()) size.trainable += s.tensor.numel();
  }
  return size;
}

int64_t checkpoint_size_bytes(const std::vector<StateTensor>& state, const std::string& config_toml) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("torchhost-profile-" + std::to_string(::getpid()) + "-checkpoint.pt");
  CheckpointContents contents;
  contents.model_state = &state;
  contents.config_toml = config_toml;
  save_checkpoint(path, contents);
  std::error_code error;
  const auto bytes = std::filesystem::file_size(path, error);
  std::filesystem::remove(path, error);
  TP_CHECK(bytes != static_cast<std::uintmax_t>(-1), "could not stat the temporary checkpoint ", path.string());
  return static_cast<int64_t>(bytes);
}

std::pair<int64_t, std::vector<OpFlops>> count_forward_flops(ModelProxy& model, const NamedTensors& batch) {
  c10::InferenceMode inference;
  FlopCounter counter;
  const NamedTensors outputs = model.forward(batch);
  return {counter.total_flops(), counter.by_operator()};
}

ModelProfile profile_model(ModelProxy& model, const NamedTensors& cpu_batch, const ProfileOptions& options,
                           const std::string& config_toml) {
  TP_CHECK(!cpu_batch.empty() && cpu_batch.front().second.dim() > 0,
           "profiling ", model.id(), " needs a batch with at least one field that has a batch dimension");
  TP_CHECK(!options.devices.empty() && !options.precisions.empty(), "profiling needs at least one device and precision");
  ModelProfile profile;
  profile.model = model.id();
  profile.batch_size = cpu_batch.front().second.size(0);
  for (const auto& [name, tensor] : cpu_batch) profile.inputs.emplace_back(name, tensor.sizes().vec());
  const std::vector<StateTensor> initial = model.state();
  const c10::Device home = initial.empty() ? c10::Device(c10::kCPU) : initial.front().tensor.device();
  profile.size = measure_size(initial);
  profile.checkpoint_bytes = checkpoint_size_bytes(initial, config_toml);

  // Eval mode: inference behaviour (batch-norm running statistics, no dropout), and a
  // training-mode batch-norm would update its statistics during the timing.
  model.set_training(false);
  try {
    bool counted = false;
    for (const c10::Device& device : options.devices) {
      NamedTensors batch;
      try {
        model.to_device(device, c10::kFloat);
        batch = on_device(cpu_batch, device);
      } catch (const std::exception& e) {
        for (Precision precision : options.precisions)
          profile.latency.push_back({device.str(), std::string(to_string(precision)), {}, 0, 0, 0, e.what()});
        continue;
      }
      if (!counted) {
        std::tie(profile.flops_per_batch, profile.flops_by_op) = count_forward_flops(model, batch);
        counted = true;
      }
      for (Precision precision : options.precisions)
        profile.latency.push_back(time_forward(model, batch, device, precision, options, profile.batch_size));
    }
    for (const auto& [device, why] : options.unavailable)
      for (Precision precision : options.precisions)
        profile.latency.push_back({device, std::string(to_string(precision)), {}, 0, 0, 0, why});
  } catch (...) {
    try {
      restore(model, home, options.leave_training);
    } catch (...) { // the first failure is the one to report
    }
    throw;
  }
  restore(model, home, options.leave_training);
  return profile;
}

}  // namespace tp
