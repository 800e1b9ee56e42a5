#include "tp/framework/engine/train_meters.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "tp/framework/dist/dist_context.h"

namespace tp {

TrainMeters::TrainMeters(c10::Device device, DistContext* dist) : dist_(dist), report_(device) {
  const auto zero = [&] { return at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(device)); };
  window_loss_sum_ = zero();
  window_count_ = zero();
  epoch_loss_sum_ = zero();
  epoch_count_ = zero();
}

void TrainMeters::add_loss(const at::Tensor& sum, const at::Tensor& items) {
  window_loss_sum_.add_(sum);
  window_count_.add_(items);
  epoch_loss_sum_.add_(sum);
  epoch_count_.add_(items);
}

std::pair<double, double> TrainMeters::read_window_loss() {
  const auto sums = global_sums(window_loss_sum_, window_count_);
  window_loss_sum_.zero_();
  window_count_.zero_();
  return sums;
}

std::pair<double, double> TrainMeters::read_epoch_loss() {
  const auto sums = global_sums(epoch_loss_sum_, epoch_count_);
  epoch_loss_sum_.zero_();
  epoch_count_.zero_();
  return sums;
}

void TrainMeters::start_epoch() {
  epoch_start_ = window_start_ = std::chrono::steady_clock::now();
  epoch_wait_s_ = window_wait_s_ = 0.0;
  epoch_samples_ = window_samples_ = window_steps_ = 0;
}

void TrainMeters::add_batch(double wait_s, int64_t samples) {
  window_wait_s_ += wait_s;
  epoch_wait_s_ += wait_s;
  window_samples_ += samples;
  epoch_samples_ += samples;
  report_.add_batch(wait_s, samples);
}

Scalars TrainMeters::read_window_throughput() {
  // Per-step times are exact over a logging window, not per step: the wall time includes the
  // device work only because the loss read before this synchronised.
  const auto now = std::chrono::steady_clock::now();
  const double wall = std::chrono::duration<double>(now - window_start_).count();
  const double steps = static_cast<double>(std::max<int64_t>(1, window_steps_));
  const double samples_per_s = wall > 0 ? double(window_samples_) / wall : 0.0;
  Scalars values{{"time/step_s", wall / steps},
                 {"time/data_wait_s", window_wait_s_ / steps},
                 {"throughput/samples_per_s", samples_per_s}};
  // The step split, peak memory and TFLOP/s (on CUDA the loss read's sync has completed the
  // phase events).
  for (auto& value : report_.log_values(samples_per_s)) values.push_back(std::move(value));
  window_start_ = now;
  window_wait_s_ = 0.0;
  window_samples_ = window_steps_ = 0;
  return values;
}

TrainMeters::EpochClock TrainMeters::epoch_clock() const {
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start_).count(), epoch_wait_s_,
          epoch_samples_};
}

std::vector<double> TrainMeters::running_loss() const {
  // At an epoch's end the epoch accumulators are already reset, so the same four values serve
  // both kinds of checkpoint.
  return {epoch_loss_sum_.item<double>(), epoch_count_.item<double>(), window_loss_sum_.item<double>(),
          window_count_.item<double>()};
}

void TrainMeters::load_running_loss(const std::vector<double>& values, bool holder) {
  if (values.size() == 4) {
    epoch_loss_sum_.fill_(values[0]);
    epoch_count_.fill_(values[1]);
    window_loss_sum_.fill_(values[2]);
    window_count_.fill_(values[3]);
  }
  if (!holder)
    for (auto* t : {&epoch_loss_sum_, &epoch_count_, &window_loss_sum_, &window_count_}) t->zero_();
}

void TrainMeters::gather_running_loss() {
  if (!dist_) return;
  std::vector<at::Tensor> one{at::stack({epoch_loss_sum_, epoch_count_, window_loss_sum_, window_count_})};
  dist_->all_reduce_sum(one, "gather the running loss for a checkpoint");
  const at::Tensor totals = one[0];
  int i = 0;
  for (auto* t : {&epoch_loss_sum_, &epoch_count_, &window_loss_sum_, &window_count_}) {
    if (dist_->rank() == 0) t->copy_(totals[i]);
    else t->zero_();
    ++i;
  }
}

std::pair<double, double> TrainMeters::global_sums(const at::Tensor& sum, const at::Tensor& count) {
  if (!dist_) return {sum.item<double>(), count.item<double>()};
  std::vector<at::Tensor> one{at::stack({sum, count})};
  dist_->all_reduce_sum(one, "sum the training loss over ranks");
  const at::Tensor host = one[0].cpu();
  return {host[0].item<double>(), host[1].item<double>()};
}

}  // namespace tp
