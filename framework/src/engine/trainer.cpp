#include "tp/framework/engine/trainer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/optim/optimizer.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/error.h"
#include "tp/framework/config/write.h"
#include "tp/framework/util/atomic_file.h"

namespace tp {
namespace {

LoaderOptions loader_options(const RunConfig& c, int64_t batch_size, LoaderMode mode, int rank, int world,
                             const c10::Device& device) {
  return LoaderOptions()
      .batch_size(batch_size)
      .num_workers(c.data.num_workers)
      .prefetch(c.data.prefetch)
      .drop_last(mode == LoaderMode::kTrain && c.train.drop_last)
      .shuffle(mode == LoaderMode::kTrain && c.data.shuffle)
      .seed(static_cast<uint64_t>(c.run.seed))
      .rank(rank)
      .world_size(world)
      .mode(mode)
      .pin_memory(device.is_cuda());
}

bool better(double candidate, double best, const std::string& mode) {
  return mode == "max" ? candidate > best : candidate < best;
}

}  // namespace

Trainer::Trainer(const RunConfig& config, RunComponents& parts, c10::Device device, Logger& logger,
                 std::filesystem::path run_dir, int rank, int world_size)
    : config_(config),
      parts_(parts),
      device_(device),
      log_(logger),
      run_dir_(std::move(run_dir)),
      rank_(rank),
      world_size_(world_size),
      history_(run_dir_, rank == 0),
      progress_(config.progress.mode, config.progress.every_seconds, rank == 0),
      best_(config.checkpoint.mode == "max" ? -std::numeric_limits<double>::infinity()
                                            : std::numeric_limits<double>::infinity()) {
  init_model();
  train_loader_ = std::make_unique<DataLoader>(
      parts_.train_data, loader_options(config_, config_.train.batch_size, LoaderMode::kTrain, rank_, world_size_, device_));
  if (parts_.val_data) {
    const int64_t eval_batch = config_.eval.batch_size > 0 ? config_.eval.batch_size : config_.train.batch_size;
    val_loader_ = std::make_unique<DataLoader>(
        parts_.val_data, loader_options(config_, eval_batch, LoaderMode::kEvalExact, rank_, world_size_, device_));
  }
}

Trainer::~Trainer() = default;

void Trainer::init_model() {
  parts_.model->to_device(device_, c10::kFloat);
  for (auto& metric : parts_.metrics) metric->to_device(device_);
  model_state_ = parts_.model->state(); // after to_device: handles from before are invalid
  optim_ = make_optimizer(config_.optim, model_state_);
  int64_t parameters = 0, trainable = 0;
  for (const auto& s : model_state_)
    if (!s.is_buffer) {
      parameters += s.tensor.numel();
      if (s.tensor.requires_grad()) trainable += s.tensor.numel();
    }
  log_.info("model " + parts_.model->id() + ": " + std::to_string(parameters) + " parameters (" +
            std::to_string(trainable) + " trainable) on " + device_.str());
  const auto zeros = [&] { return at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(device_)); };
  window_loss_sum_ = zeros();
  window_count_ = zeros();
  epoch_loss_sum_ = zeros();
  epoch_count_ = zeros();
}

FitSummary Trainer::fit() {
  const auto start = std::chrono::steady_clock::now();
  FitSummary summary;
  summary.monitor = config_.checkpoint.monitor;
  dispatch(TP_EVENT_FIT_BEGIN, {});
  for (epoch_ = 0; epoch_ < config_.train.epochs && !stop_requested_; ++epoch_) {
    train_epoch(epoch_);
    Scalars eval;
    const bool last = epoch_ + 1 == config_.train.epochs || stop_requested_;
    if (val_loader_ && ((epoch_ + 1) % config_.eval.every_epochs == 0 || last)) {
      eval = evaluate();
      summary.last_eval = eval;
      dispatch(TP_EVENT_EVAL_END, eval);
    }
    end_epoch(epoch_, eval);
  }
  dispatch(TP_EVENT_FIT_END, summary.last_eval);
  summary.epochs = epoch_;
  summary.steps = step_;
  summary.best = best_;
  summary.stopped_early = stop_requested_;
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

void Trainer::train_epoch(int64_t epoch) {
  parts_.model->set_training(true);
  train_loader_->start_epoch(static_cast<uint64_t>(epoch));
  progress_.start_epoch(epoch, config_.train.epochs, train_loader_->batches_per_epoch());
  dispatch(TP_EVENT_EPOCH_BEGIN, {});
  int64_t done = 0;
  while (auto batch = train_loader_->next()) {
    train_step(*batch);
    ++done;
    double loss = std::numeric_limits<double>::quiet_NaN();
    const bool log_step = step_ % config_.train.log_every_steps == 0;
    if (log_step) {
      loss = read_window_loss();
      const double lr = current_lr(*optim_.optimizer);
      history_.add({"step", {{"step", double(step_)}, {"epoch", double(epoch)}, {"lr", lr}, {"train/loss", loss}}});
      const uint32_t requests = dispatch(TP_EVENT_STEP_END, {{"train/loss", loss}, {"lr", lr}});
      if (requests & TP_REQUEST_STOP) stop_requested_ = true;
      if (requests & TP_REQUEST_SAVE) save_checkpoints(epoch - 1, {});
    }
    progress_.update(done, loss, current_lr(*optim_.optimizer));
    if (stop_requested_) break;
  }
}

void Trainer::train_step(NamedTensors& cpu_batch) {
  // 1. Fetch: the loader already collated this batch on a worker; copy it to the device
  //    (non_blocking from pinned memory on CUDA, a no-op on CPU).
  const NamedTensors batch = to_device(std::move(cpu_batch));

  // 2. Forward: model on every field, then the loss, which returns (sum of item losses, items).
  const NamedTensors outputs = parts_.model->forward(batch);
  const LossTerms terms = parts_.loss->forward(outputs, batch);
  const at::Tensor count = terms.count.to(terms.sum.scalar_type());
  const at::Tensor loss = terms.sum / count;

  // 3. Backward.
  loss.backward();

  // 4. Update: one optimizer step; gradients set to none (frees them, skips a memset).
  optim_.optimizer->step();
  optim_.optimizer->zero_grad(/*set_to_none=*/true);
  ++step_;

  // 5. Report: accumulate on the device; the value is read only on log steps (a device sync).
  //    On CPU reading is free, so a non-finite loss is caught at the step that produced it.
  const at::Tensor sum = terms.sum.detach().to(at::kDouble);
  const at::Tensor items = terms.count.detach().to(at::kDouble);
  window_loss_sum_.add_(sum);
  window_count_.add_(items);
  epoch_loss_sum_.add_(sum);
  epoch_count_.add_(items);
  if (device_.is_cpu() && !std::isfinite(loss.item<double>()))
    throw Error("the training loss became " + std::to_string(loss.item<double>()) + " at step " +
                std::to_string(step_) + " (epoch " + std::to_string(epoch_ + 1) + ", batch " +
                std::to_string(train_loader_->next_batch_index()) + ", lr " +
                std::to_string(current_lr(*optim_.optimizer)) +
                "). Lower optim.lr, check the data for NaN/Inf, or clip gradients.");
}

double Trainer::read_window_loss() {
  // Sync point on CUDA: waits for every queued kernel of the window.
  const double sum = window_loss_sum_.item<double>();
  const double count = window_count_.item<double>();
  window_loss_sum_.zero_();
  window_count_.zero_();
  if (!std::isfinite(sum))
    throw Error("the training loss became non-finite between steps " +
                std::to_string(step_ - config_.train.log_every_steps + 1) + " and " + std::to_string(step_) +
                ". Lower optim.lr, check the data for NaN/Inf, or clip gradients.");
  return count > 0 ? sum / count : std::numeric_limits<double>::quiet_NaN();
}

Scalars Trainer::evaluate() {
  parts_.model->set_training(false);
  for (auto& metric : parts_.metrics) metric->reset();
  auto options = at::TensorOptions().dtype(at::kDouble).device(device_);
  at::Tensor loss_sum = at::zeros({}, options), count = at::zeros({}, options);
  {
    // Inference mode: no autograd bookkeeping at all (cheaper than no_grad).
    c10::InferenceMode inference;
    val_loader_->start_epoch(0);
    while (auto cpu_batch = val_loader_->next()) {
      const NamedTensors batch = to_device(std::move(*cpu_batch));
      const NamedTensors outputs = parts_.model->forward(batch);
      const LossTerms terms = parts_.loss->forward(outputs, batch);
      loss_sum.add_(terms.sum.to(at::kDouble));
      count.add_(terms.count.to(at::kDouble));
      for (auto& metric : parts_.metrics) metric->update(outputs, batch);
    }
  }
  Scalars result;
  result.emplace_back("val/loss", (loss_sum / count).item<double>()); // sync, once per evaluation
  for (auto& metric : parts_.metrics)
    for (const auto& [name, value] : metric->compute()) result.emplace_back("val/" + name, value);
  parts_.model->set_training(true);
  return result;
}

void Trainer::end_epoch(int64_t epoch, const Scalars& eval) {
  const double train_loss = (epoch_loss_sum_ / epoch_count_).item<double>();
  epoch_loss_sum_.zero_();
  epoch_count_.zero_();
  const double lr = current_lr(*optim_.optimizer);
  HistoryRecord record{"epoch", {{"epoch", double(epoch + 1)}, {"step", double(step_)}, {"lr", lr}, {"train/loss", train_loss}}};
  for (const auto& value : eval) record.values.push_back(value);
  history_.add(record);
  history_.flush_csv();
  Scalars summary{{"train/loss", train_loss}};
  summary.insert(summary.end(), eval.begin(), eval.end());
  progress_.end_epoch(summary);
  std::string line = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(config_.train.epochs);
  for (const auto& [name, value] : summary) line += " " + name + "=" + format_number(value);
  log_.file_only(line);
  const uint32_t requests = dispatch(TP_EVENT_EPOCH_END, summary);
  if (requests & TP_REQUEST_STOP) stop_requested_ = true;
  save_checkpoints(epoch, eval);
}

void Trainer::save_checkpoints(int64_t epoch, const Scalars& eval) {
  if (rank_ != 0) return;
  CheckpointContents contents;
  contents.model_state = &model_state_;
  contents.optimizer = optim_.optimizer.get();
  contents.optimizer_groups = optim_.group_names;
  contents.epoch = epoch + 1;
  contents.step = step_;
  contents.monitor = config_.checkpoint.monitor;
  contents.config_toml = to_toml_text(config_.resolved);
  contents.plugins = parts_.plugin_versions;
  bool improved = false;
  for (const auto& [name, value] : eval)
    if (name == config_.checkpoint.monitor && std::isfinite(value) && better(value, best_, config_.checkpoint.mode)) {
      best_ = value;
      improved = true;
    }
  contents.best = best_;
  const auto dir = run_dir_ / "checkpoints";
  if (config_.checkpoint.save_last) {
    save_checkpoint(dir / "last.pt", contents);
    dispatch(TP_EVENT_CHECKPOINT_SAVE, {}, (dir / "last.pt").string());
  }
  if (improved && config_.checkpoint.save_best) {
    save_checkpoint(dir / "best.pt", contents);
    dispatch(TP_EVENT_CHECKPOINT_SAVE, {{config_.checkpoint.monitor, best_}}, (dir / "best.pt").string());
  }
}

uint32_t Trainer::dispatch(int32_t kind, const Scalars& scalars, const std::string& message) {
  if (parts_.callbacks.empty()) return TP_REQUEST_NONE;
  std::vector<tp_scalar_t> values;
  for (const auto& [name, value] : scalars) values.push_back({name.c_str(), value});
  tp_event_t event{};
  event.struct_size = sizeof(tp_event_t);
  event.kind = kind;
  event.step = static_cast<uint64_t>(step_);
  event.epoch = static_cast<uint64_t>(epoch_);
  event.lr = current_lr(*optim_.optimizer);
  event.scalars = values.data();
  event.scalar_count = static_cast<uint32_t>(values.size());
  event.message = message.empty() ? nullptr : message.c_str();
  uint32_t requests = TP_REQUEST_NONE;
  for (auto& callback : parts_.callbacks) requests |= callback->on_event(event);
  return requests;
}

NamedTensors Trainer::to_device(NamedTensors batch) const {
  if (device_.is_cpu()) return batch;
  for (auto& [name, tensor] : batch) tensor = tensor.to(device_, /*non_blocking=*/true);
  return batch;
}

}  // namespace tp
