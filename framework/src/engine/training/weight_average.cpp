// Averaged weights (weight_average.h): PyTorch's AveragedModel update as foreach ops.
#include "engine/training/weight_average.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>

#include "tp/framework/error.h"

namespace tp {

double AverageRule::new_weight(int64_t n) const {
  if (kind == Kind::kEqual) return 1.0 / static_cast<double>(n + 1);
  // timm's ModelEmaV3 warmup (gamma 1, power 2/3), counted in updates already averaged: early
  // averages forget the random initialisation quickly, later ones settle at `decay`.
  const double decay_n = warmup ? std::min(decay, 1.0 - std::pow(1.0 + static_cast<double>(n), -2.0 / 3.0)) : decay;
  return 1.0 - decay_n;
}

WeightAverage::WeightAverage(std::string name, AverageRule rule, const std::vector<StateTensor>& model_state,
                             c10::Device device)
    : name_(std::move(name)), rule_(rule) {
  // AveragedModel deep-copies the module: before its first update the average is the model.
  c10::NoGradGuard no_grad;
  state_.reserve(model_state.size());
  for (const auto& s : model_state)
    state_.push_back({s.name, s.tensor.detach().to(device, /*non_blocking=*/false, /*copy=*/true), s.is_buffer});
}

void WeightAverage::update(const std::vector<StateTensor>& model_state, const at::Tensor& finite) {
  TP_CHECK(model_state.size() == state_.size(), "the model's state changed size since the average was made");
  c10::NoGradGuard no_grad;
  // Lerped: floating-point parameters, and floating-point buffers when averaged. Copied: the rest.
  // Gated by `finite`: non-finite live weights are replaced by the average itself, and a lerp
  // (or copy) towards itself leaves it as it was, bit for bit.
  const at::Tensor gate = finite.defined() && !state_.empty() ? finite.to(state_.front().tensor.device()) : at::Tensor();
  std::vector<at::Tensor> averaged, live;
  for (std::size_t i = 0; i < state_.size(); ++i) {
    at::Tensor& avg = state_[i].tensor;
    at::Tensor current = model_state[i].tensor.detach().to(avg.device());
    if (gate.defined() && avg.is_floating_point()) current = at::where(gate, current, avg);
    const bool lerped = updates_ > 0 && avg.is_floating_point() && (!state_[i].is_buffer || rule_.average_buffers);
    if (lerped) {
      averaged.push_back(avg);
      live.push_back(current);
    } else {
      avg.copy_(current);
    }
  }
  // get_ema_multi_avg_fn / get_swa_multi_avg_fn: torch._foreach_lerp_(avg, live, weight).
  if (!averaged.empty()) at::_foreach_lerp_(averaged, live, rule_.new_weight(updates_));
  ++updates_;
}

int64_t WeightAverage::bytes() const {
  int64_t total = 0;
  for (const auto& s : state_) total += static_cast<int64_t>(s.tensor.nbytes());
  return total;
}

void WeightAverage::load(const NamedWeights& saved, int64_t updates) {
  restore_weights(saved, state_);
  updates_ = updates;
}

NamedWeights named_weights(const std::vector<StateTensor>& state) {
  NamedWeights out;
  out.reserve(state.size());
  for (const auto& s : state) out.emplace_back(s.name, s.tensor.detach());
  return out;
}

SwappedInAverage::SwappedInAverage(const WeightAverage& average, const std::vector<StateTensor>& model_state)
    : model_state_(model_state) {
  c10::NoGradGuard no_grad;
  live_.reserve(model_state.size());
  for (std::size_t i = 0; i < model_state.size(); ++i) {
    live_.push_back(model_state[i].tensor.detach().clone());
    model_state[i].tensor.detach().copy_(average.state()[i].tensor);
  }
}

SwappedInAverage::~SwappedInAverage() {
  c10::NoGradGuard no_grad;
  for (std::size_t i = 0; i < live_.size(); ++i) model_state_[i].tensor.detach().copy_(live_[i]);
}

}  // namespace tp
