#include "engine/training/train_meters.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "engine/training/active_clock.h"
#include "tp/framework/dist/collectives.h"
#include "tp/framework/error.h"

namespace tp {

TrainMeters::TrainMeters(c10::Device device, Collectives& collectives, NanChecks nan_checks)
    : collectives_(collectives), nan_checks_(nan_checks), report_(device) {
  const auto zero = [&] { return at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(device)); };
  window_loss_sum_ = zero();
  window_count_ = zero();
  epoch_loss_sum_ = zero();
  epoch_count_ = zero();
}

void TrainMeters::add_loss(const at::Tensor& sum, const at::Tensor& items,
                           const std::vector<std::pair<std::string, at::Tensor>>& terms) {
  window_loss_sum_.add_(sum);
  window_count_.add_(items);
  epoch_loss_sum_.add_(sum);
  epoch_count_.add_(items);
  if (terms.empty()) return;
  if (term_names_.empty()) {
    for (const auto& [name, value] : terms) term_names_.push_back(name);
    const auto k = static_cast<int64_t>(terms.size());
    window_terms_ = at::zeros({k}, window_loss_sum_.options());
    epoch_terms_ = at::zeros({k}, window_loss_sum_.options());
    // A resumed run: the checkpoint's running term sums (the epoch's, then the window's).
    if (pending_terms_.size() == static_cast<std::size_t>(2 * k)) {
      const at::Tensor saved = at::tensor(pending_terms_, at::TensorOptions().dtype(at::kDouble));
      epoch_terms_.copy_(saved.slice(0, 0, k));
      window_terms_.copy_(saved.slice(0, k, 2 * k));
    }
    pending_terms_.clear();
  }
  TP_CHECK(terms.size() == term_names_.size(), "the loss returned ", terms.size(), " named terms, earlier ",
           term_names_.size(), ": a loss's terms must be the same on every call");
  std::vector<at::Tensor> values;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    TP_CHECK(terms[i].first == term_names_[i], "the loss's term ", i, " is '", terms[i].first, "', earlier '",
             term_names_[i], "': a loss's terms must be the same on every call");
    values.push_back(terms[i].second.detach().to(at::kDouble));
  }
  const at::Tensor stacked = at::stack(values);
  window_terms_.add_(stacked);
  epoch_terms_.add_(stacked);
}

at::Tensor TrainMeters::window_sums() const {
  std::vector<at::Tensor> parts{window_loss_sum_.reshape({1}), window_count_.reshape({1})};
  if (window_terms_.defined()) parts.push_back(window_terms_);
  return at::cat(parts);
}

std::pair<double, double> TrainMeters::read_window_loss(const std::string& span) {
  // The agreed sums are already global: reading them is the sync, with no collective of its own.
  const auto sums = agreed_window_.defined() ? read_sums(std::exchange(agreed_window_, at::Tensor()).cpu(), span)
                                             : read_sums(global_sums(window_loss_sum_, window_count_, window_terms_), span);
  window_loss_sum_.zero_();
  window_count_.zero_();
  if (window_terms_.defined()) window_terms_.zero_();
  return sums;
}

std::pair<double, double> TrainMeters::read_epoch_loss(const std::string& span) {
  const auto sums = read_sums(global_sums(epoch_loss_sum_, epoch_count_, epoch_terms_), span);
  epoch_loss_sum_.zero_();
  epoch_count_.zero_();
  if (epoch_terms_.defined()) epoch_terms_.zero_();
  return sums;
}

void TrainMeters::start_epoch() {
  epoch_start_s_ = window_start_s_ = active_seconds();
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
  // The training clock: a suspension (SIGSTOP ... SIGCONT) in the window is not step time.
  const double now = active_seconds();
  const double wall = now - window_start_s_;
  const double steps = static_cast<double>(std::max<int64_t>(1, window_steps_));
  const double samples_per_s = wall > 0 ? double(window_samples_) / wall : 0.0;
  Scalars values{{"time/step_s", wall / steps},
                 {"time/data_wait_s", window_wait_s_ / steps},
                 {"throughput/samples_per_s", samples_per_s}};
  // The step split, peak memory and TFLOP/s (on CUDA the loss read's sync has completed the
  // phase events).
  for (auto& value : report_.log_values(samples_per_s)) values.push_back(std::move(value));
  window_start_s_ = now;
  window_wait_s_ = 0.0;
  window_samples_ = window_steps_ = 0;
  return values;
}

TrainMeters::EpochClock TrainMeters::epoch_clock() const {
  return {active_seconds() - epoch_start_s_, epoch_wait_s_,
          epoch_samples_};
}

std::vector<double> TrainMeters::running_loss() const {
  // At an epoch's end the epoch accumulators are already reset, so the same four values serve
  // both kinds of checkpoint.
  std::vector<double> out{epoch_loss_sum_.item<double>(), epoch_count_.item<double>(),
                          window_loss_sum_.item<double>(), window_count_.item<double>()};
  if (epoch_terms_.defined()) {
    // Named terms follow: the epoch's term sums, then the window's.
    const at::Tensor terms = at::cat({epoch_terms_, window_terms_}).cpu().contiguous();
    out.insert(out.end(), terms.data_ptr<double>(), terms.data_ptr<double>() + terms.numel());
  }
  return out;
}

void TrainMeters::load_running_loss(const std::vector<double>& values, bool holder) {
  if (values.size() >= 4) {
    epoch_loss_sum_.fill_(values[0]);
    epoch_count_.fill_(values[1]);
    window_loss_sum_.fill_(values[2]);
    window_count_.fill_(values[3]);
    // The term names are known only at the first forward: add_loss applies these then.
    if (holder) pending_terms_.assign(values.begin() + 4, values.end());
  }
  if (!holder)
    for (auto* t : {&epoch_loss_sum_, &epoch_count_, &window_loss_sum_, &window_count_}) t->zero_();
}

void TrainMeters::gather_running_loss() {
  std::vector<at::Tensor> parts{at::stack({epoch_loss_sum_, epoch_count_, window_loss_sum_, window_count_})};
  if (epoch_terms_.defined()) {
    parts.push_back(epoch_terms_);
    parts.push_back(window_terms_);
  }
  std::vector<at::Tensor> one{at::cat(parts)};
  collectives_.all_reduce_sum(one, "gather the running loss for a checkpoint");
  // Rank 0 holds the global sums, the others zeros (a single process keeps its own: the identity).
  const at::Tensor totals = one[0];
  int i = 0;
  for (auto* t : {&epoch_loss_sum_, &epoch_count_, &window_loss_sum_, &window_count_}) {
    if (collectives_.rank() == 0) t->copy_(totals[i]);
    else t->zero_();
    ++i;
  }
  if (!epoch_terms_.defined()) return;
  const int64_t k = epoch_terms_.numel();
  if (collectives_.rank() == 0) {
    epoch_terms_.copy_(totals.slice(0, 4, 4 + k));
    window_terms_.copy_(totals.slice(0, 4 + k, 4 + 2 * k));
  } else {
    epoch_terms_.zero_();
    window_terms_.zero_();
  }
}

at::Tensor TrainMeters::global_sums(const at::Tensor& sum, const at::Tensor& count, const at::Tensor& terms) {
  std::vector<at::Tensor> parts{at::stack({sum, count})};
  if (terms.defined()) parts.push_back(terms);
  std::vector<at::Tensor> one{parts.size() == 1 ? parts[0] : at::cat(parts)};
  collectives_.all_reduce_sum(one, "sum the training loss over ranks");
  return one[0].cpu(); // the sync point of a loss read
}

std::pair<double, double> TrainMeters::read_sums(const at::Tensor& host, const std::string& span) {
  const double total = host[0].item<double>(), items = host[1].item<double>();
  // train.nan_policy = "stop" where the host reads the loss anyway (nan_policy.h); every rank
  // reads the same global sum, so all stop together.
  if (nan_checks_.at_read && !std::isfinite(total))
    throw Error("the training loss became non-finite " + span +
                ". Lower optim.lr, check the data for NaN/Inf, or clip gradients (train.max_grad_norm).");
  last_terms_.clear();
  for (std::size_t i = 0; i < term_names_.size() && host.numel() > 2; ++i)
    last_terms_.emplace_back("train/loss/" + term_names_[i], host[2 + static_cast<int64_t>(i)].item<double>() / items);
  return {total, items};
}

}  // namespace tp
