// update_bn for plugin models (batchnorm_refresh.h): momentum measured, statistics read as
// m x stat from zeroed running buffers, averaged over batches.
#include "engine/training/batchnorm_refresh.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "tp/framework/dist/collectives.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

/// One BatchNorm layer's buffers (views of the model's own tensors).
struct BatchNormLayer {
  at::Tensor mean, var, tracked; ///< tracked may be undefined (track_running_stats without a counter)
  at::Tensor momentum;           ///< measured, per element of `mean`
  at::Tensor mean_sum, var_sum;  ///< sums of m x stat over batches
  at::Tensor kept_mean, kept_var; ///< the statistics before measuring, put back where not recomputed
};

std::map<std::string, BatchNormLayer> find_layers(const std::vector<StateTensor>& model_state) {
  std::map<std::string, BatchNormLayer> layers;
  const auto prefix = [](const std::string& name, const std::string& suffix) {
    return name.ends_with(suffix) ? std::optional(name.substr(0, name.size() - suffix.size())) : std::nullopt;
  };
  for (const auto& s : model_state) {
    if (!s.is_buffer) continue;
    if (auto p = prefix(s.name, "running_mean")) layers[*p].mean = s.tensor.detach();
    else if (auto q = prefix(s.name, "running_var")) layers[*q].var = s.tensor.detach();
    else if (auto r = prefix(s.name, "num_batches_tracked")) layers[*r].tracked = s.tensor.detach();
  }
  std::erase_if(layers, [](const std::pair<const std::string, BatchNormLayer>& item) {
    return !item.second.mean.defined() || !item.second.var.defined();
  });
  for (auto& [name, layer] : layers) {
    layer.kept_mean = layer.mean.clone();
    layer.kept_var = layer.var.clone();
  }
  return layers;
}

/// Forwards `batch` with the same random state every time (dropout before a BatchNorm layer).
class SameRandomness {
 public:
  explicit SameRandomness(c10::Device device) : device_(device) {
    state_cpu_ = generator(c10::Device(c10::kCPU)).get_state();
    if (device.is_cuda()) state_device_ = generator(device).get_state();
  }
  void rewind() const {
    set(c10::Device(c10::kCPU), state_cpu_);
    if (device_.is_cuda()) set(device_, state_device_);
  }

 private:
  static at::Generator generator(c10::Device device) {
    return device.is_cpu() ? at::detail::getDefaultCPUGenerator() : at::globalContext().defaultGenerator(device);
  }
  static void set(c10::Device device, const at::Tensor& state) {
    at::Generator g = generator(device);
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_state(state);
  }
  c10::Device device_;
  at::Tensor state_cpu_, state_device_;
};

/// [all ranks] The layers to recompute and their momentum, the same on every rank: the measured
/// momentum averaged over the ranks that measured one (a rank with no non-empty batch measured
/// none), then the layers whose statistics do not move (eval mode, momentum 0) dropped. One
/// all-reduce, after each rank's first non-empty batch (or its last batch when it had none), so
/// every rank reduces the same tensors afterwards. Returns false when no layer is left; throws
/// tp::Error (on every rank) when no rank had a batch.
bool agree_on_layers(std::map<std::string, BatchNormLayer>& layers, bool measured, const BatchPlacement& placement,
                     Collectives& collectives) {
  const auto options = at::TensorOptions().dtype(at::kDouble).device(placement.device());
  std::vector<at::Tensor> sums{at::full({}, measured ? 1.0 : 0.0, options)};
  for (auto& [name, layer] : layers)
    sums.push_back(measured ? layer.momentum.to(at::kDouble).reshape({-1}) : at::zeros({layer.mean.numel()}, options));
  at::Tensor packed = at::cat({sums.front().reshape({1}), at::cat(std::vector<at::Tensor>(sums.begin() + 1, sums.end()))});
  std::vector<at::Tensor> one{packed};
  collectives.all_reduce_sum(one, "agree on the BatchNorm layers to recompute (swa.update_bn)");
  const double ranks_measured = packed[0].item<double>();
  if (ranks_measured == 0) // every rank alike
    throw Error("swa.update_bn: the training split gave no batch on any rank to recompute the BatchNorm statistics "
                "from (every sample skipped?)");
  int64_t at = 1;
  for (auto& [name, layer] : layers) {
    const int64_t n = layer.mean.numel();
    layer.momentum = (packed.slice(0, at, at + n) / ranks_measured).view(layer.mean.sizes()).to(layer.mean.dtype());
    at += n;
  }
  // Measuring overwrote every layer's statistics: those not recomputed get theirs back.
  std::erase_if(layers, [&](const std::pair<const std::string, BatchNormLayer>& item) {
    const BatchNormLayer& layer = item.second; // tensor handles: copy_ writes through const
    if (layer.momentum.abs().max().item<double>() >= 1e-12) return false;
    layer.mean.copy_(layer.kept_mean);
    layer.var.copy_(layer.kept_var);
    return true;
  });
  return !layers.empty();
}

}  // namespace

int64_t refresh_batchnorm_statistics(RunComponents& parts, const std::vector<StateTensor>& model_state,
                                     DataLoader& loader, uint64_t epoch, int64_t batches,
                                     const BatchPlacement& placement, Collectives& collectives) {
  std::map<std::string, BatchNormLayer> layers = find_layers(model_state);
  if (layers.empty()) return 0;
  c10::NoGradGuard no_grad;
  parts.model->set_training(true);
  const auto zero_running = [&](double value) {
    for (auto& [name, layer] : layers) {
      layer.mean.fill_(value);
      layer.var.fill_(value);
    }
  };
  loader.start_epoch(epoch);
  int64_t counted = 0;
  bool measured = false;
  for (int64_t b = 0; b < batches; ++b) {
    auto cpu_batch = loader.next();
    if (!cpu_batch) break;
    if (cpu_batch->empty()) continue; // every sample skipped
    const NamedTensors batch = placement.to_device(std::move(*cpu_batch));
    if (!measured) {
      // 1 - m = (running after a forward from 1) - (running after the same forward from 0).
      const SameRandomness randomness(placement.device());
      zero_running(1.0);
      parts.model->forward(batch);
      std::map<std::string, at::Tensor> from_one;
      for (auto& [name, layer] : layers) from_one[name] = layer.mean.clone();
      randomness.rewind();
      zero_running(0.0);
      parts.model->forward(batch);
      for (auto& [name, layer] : layers) layer.momentum = 1.0 - (from_one[name] - layer.mean);
      randomness.rewind();
      measured = true;
      // Which layers to recompute is decided once every rank has measured (agree_on_layers).
      if (!agree_on_layers(layers, measured, placement, collectives)) return 0;
    }
    zero_running(0.0);
    parts.model->forward(batch);
    for (auto& [name, layer] : layers) {
      const at::Tensor mean = layer.mean.to(at::kDouble), var = layer.var.to(at::kDouble);
      layer.mean_sum = layer.mean_sum.defined() ? layer.mean_sum + mean : mean;
      layer.var_sum = layer.var_sum.defined() ? layer.var_sum + var : var;
    }
    ++counted;
  }
  // A rank whose every batch was empty still joins the agreement the others made at their first.
  if (!measured && !agree_on_layers(layers, measured, placement, collectives)) return 0;
  // Data-parallel: the per-rank sums add up to the statistics of all ranks' batches (the
  // identity for a single process).
  at::Tensor count = at::full({}, static_cast<double>(counted), at::TensorOptions().dtype(at::kDouble).device(placement.device()));
  std::vector<at::Tensor> sums{count};
  for (auto& [name, layer] : layers) {
    if (!layer.mean_sum.defined()) layer.mean_sum = at::zeros_like(layer.mean, at::kDouble);
    if (!layer.var_sum.defined()) layer.var_sum = at::zeros_like(layer.var, at::kDouble);
    sums.push_back(layer.mean_sum);
    sums.push_back(layer.var_sum);
  }
  collectives.all_reduce_sum(sums, "sum BatchNorm statistics over ranks (swa.update_bn)");
  TP_CHECK(count.item<double>() > 0, "swa.update_bn: the training split gave no batch to recompute BatchNorm statistics from");
  // The cumulative average BatchNorm keeps with momentum=None: the mean of the batches' statistics.
  for (auto& [name, layer] : layers) {
    const at::Tensor denominator = layer.momentum.to(at::kDouble) * count;
    layer.mean.copy_(layer.mean_sum / denominator);
    layer.var.copy_(layer.var_sum / denominator);
    if (layer.tracked.defined()) layer.tracked.fill_(count.item<double>());
  }
  return static_cast<int64_t>(layers.size());
}

}  // namespace tp
