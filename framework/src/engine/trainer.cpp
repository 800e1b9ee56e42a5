#include "tp/framework/engine/trainer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize/input-archive.h>
#include <c10/core/GradMode.h>
#include <torch/optim/optimizer.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
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
      precision_(parse_precision(config.amp.precision)),
      scaler_(GradScalerOptions()
                  .init_scale(config.amp.init_scale)
                  .growth_factor(config.amp.growth_factor)
                  .backoff_factor(config.amp.backoff_factor)
                  .growth_interval(config.amp.growth_interval)
                  .enabled(needs_grad_scaler(precision_))),
      history_(run_dir_, rank == 0),
      progress_(config.progress.mode, config.progress.every_seconds, rank == 0),
      best_(config.checkpoint.mode == "max" ? -std::numeric_limits<double>::infinity()
                                            : std::numeric_limits<double>::infinity()) {
  check_precision_supported(precision_, device_);
  init_model();
  train_loader_ = std::make_unique<DataLoader>(
      parts_.train_data, loader_options(config_, config_.train.batch_size, LoaderMode::kTrain, rank_, world_size_, device_));
  init_schedule();
  if (parts_.val_data) {
    const int64_t eval_batch = config_.eval.batch_size > 0 ? config_.eval.batch_size : config_.train.batch_size;
    val_loader_ = std::make_unique<DataLoader>(
        parts_.val_data, loader_options(config_, eval_batch, LoaderMode::kEvalExact, rank_, world_size_, device_));
  }
}

Trainer::~Trainer() = default;

void Trainer::init_schedule() {
  const ScheduleSection& s = config_.schedule;
  SchedulerOptions o;
  o.name = s.name;
  o.warmup_steps = s.warmup_steps;
  o.warmup_start_factor = s.warmup_start_factor;
  o.min_lr = {s.min_lr};
  o.max_lr = {s.max_lr > 0 ? s.max_lr : config_.optim.lr};
  o.pct_start = s.pct_start;
  o.anneal_strategy = s.anneal_strategy;
  o.three_phase = s.three_phase;
  o.div_factor = s.div_factor;
  o.final_div_factor = s.final_div_factor;
  o.cycle_momentum = s.cycle_momentum;
  o.base_momentum = {s.base_momentum};
  o.max_momentum = {s.max_momentum};
  o.step_size = s.step_size;
  o.gamma = s.gamma;
  o.milestones = s.milestones;
  o.mode = s.mode;
  o.factor = s.factor;
  o.patience = s.patience;
  o.threshold = s.threshold;
  o.threshold_mode = s.threshold_mode;
  o.cooldown = s.cooldown;
  o.eps = s.eps;
  // Time is optimizer steps: a window of grad_accum_steps micro-batches is one step, and the
  // epoch's short last window counts too (lessons-from-peers 5).
  const int64_t total = total_optimizer_steps(config_.train.epochs, train_loader_->batches_per_epoch(),
                                              config_.train.grad_accum_steps);
  scheduler_ = make_scheduler(o, *optim_.optimizer, total);
  log_.info("schedule " + s.name + " over " + std::to_string(total) + " optimizer steps; precision " +
            std::string(to_string(precision_)));
}

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
  window_estimate_ = zeros();
  window_items_ = zeros();
  epoch_loss_sum_ = zeros();
  epoch_count_ = zeros();
}

FitSummary Trainer::fit() {
  const auto start = std::chrono::steady_clock::now();
  FitSummary summary;
  summary.monitor = config_.checkpoint.monitor;
  dispatch(TP_EVENT_FIT_BEGIN, {});
  for (epoch_ = start_epoch_; epoch_ < config_.train.epochs && !stop_requested_; ++epoch_) {
    train_epoch(epoch_);
    Scalars eval;
    const bool last = epoch_ + 1 == config_.train.epochs || stop_requested_;
    if (val_loader_ && ((epoch_ + 1) % config_.eval.every == 0 || last)) {
      eval = evaluate();
      summary.last_eval = eval;
      for (const auto& [name, value] : eval)
        if (name == config_.schedule.monitor) scheduler_->step_metric(value);
      dispatch(TP_EVENT_EVAL_END, eval);
    }
    end_epoch(epoch_, eval);
  }
  dispatch(TP_EVENT_FIT_END, summary.last_eval);
  summary.epochs = epoch_;
  summary.steps = step_;
  summary.best = best_;
  summary.stopped_early = stop_requested_;
  summary.skipped_steps = skipped_steps_;
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
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

CheckpointContents Trainer::checkpoint_contents(int64_t resume_epoch, int64_t resume_batch) const {
  CheckpointContents contents;
  contents.model_state = &model_state_;
  contents.optimizer = optim_.optimizer.get();
  contents.optimizer_groups = optim_.group_names;
  contents.scheduler_state = scheduler_->state();
  contents.scaler_scale = scaler_.get_scale();
  contents.scaler_growth_tracker = scaler_.get_growth_tracker();
  contents.epoch = resume_epoch;
  contents.batch = resume_batch;
  contents.step = step_;
  {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    contents.rng_cpu = generator.get_state();
  }
  // Sync point on CUDA; checkpoints are rare. At an epoch's end the accumulators are already
  // reset, so the same four values serve both kinds of checkpoint.
  contents.running_loss = {epoch_loss_sum_.item<double>(), epoch_count_.item<double>(),
                           window_loss_sum_.item<double>(), window_count_.item<double>()};
  contents.monitor = config_.checkpoint.monitor;
  contents.best = best_;
  contents.config_toml = to_toml_text(config_.resolved);
  contents.plugins = parts_.plugin_versions;
  return contents;
}

void Trainer::save_checkpoints(int64_t epoch, const Scalars& eval) {
  if (rank_ != 0) return;
  bool improved = false;
  for (const auto& [name, value] : eval)
    if (name == config_.checkpoint.monitor && std::isfinite(value) && better(value, best_, config_.checkpoint.mode)) {
      best_ = value;
      improved = true;
    }
  const CheckpointContents contents = checkpoint_contents(epoch + 1, 0);
  const auto dir = run_dir_ / "checkpoints";
  if (config_.checkpoint.save_last) {
    save_checkpoint(dir / "last.pt", contents);
    dispatch(TP_EVENT_CHECKPOINT_SAVE, {}, (dir / "last.pt").string());
  }
  if (improved && config_.checkpoint.save_top_k > 0) {
    save_checkpoint(dir / "best.pt", contents);
    dispatch(TP_EVENT_CHECKPOINT_SAVE, {{config_.checkpoint.monitor, best_}}, (dir / "best.pt").string());
  }
}

void Trainer::save_position() {
  if (rank_ != 0) return;
  const auto path = run_dir_ / "checkpoints" / "last.pt";
  save_checkpoint(path, checkpoint_contents(epoch_, train_loader_->next_batch_index()));
  dispatch(TP_EVENT_CHECKPOINT_SAVE, {}, path.string());
}

void Trainer::resume_from(const LoadedCheckpoint& c) {
  restore_model_state(c, model_state_);
  if (!c.optimizer_archive.empty()) {
    torch::serialize::InputArchive archive;
    std::istringstream bytes(std::string(c.optimizer_archive.begin(), c.optimizer_archive.end()));
    archive.load_from(bytes);
    optim_.optimizer->load(archive);
  }
  if (!c.scheduler_state.empty()) scheduler_->load_state(c.scheduler_state);
  if (scaler_.is_enabled() && c.scaler_scale > 0) {
    GradScalerState state = scaler_.state();
    state.scale = c.scaler_scale;
    state.growth_tracker = c.scaler_growth_tracker;
    scaler_.load_state(state);
  }
  if (c.rng_cpu.defined()) {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex()); // the generator is shared process-wide
    generator.set_state(c.rng_cpu);
  }
  step_ = c.step;
  start_epoch_ = c.epoch;
  start_batch_ = c.batch;
  if (c.running_loss.size() == 4) {
    epoch_loss_sum_.fill_(c.running_loss[0]);
    epoch_count_.fill_(c.running_loss[1]);
    window_loss_sum_.fill_(c.running_loss[2]);
    window_count_.fill_(c.running_loss[3]);
  }
  if (c.monitor == config_.checkpoint.monitor) best_ = c.best;
  history_.resume(c.step);
  log_.info("resumed at epoch " + std::to_string(c.epoch + 1) + ", batch " + std::to_string(c.batch) + ", step " +
            std::to_string(c.step));
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
