#include "tp/framework/engine/trainer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <torch/optim/optimizer.h>
#include <torch/version.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>
#include <utility>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/dist/dist_context.h"
#include "tp/framework/dist/grad_sync.h"
#include "tp/framework/error.h"
#include "tp/framework/config/write.h"
#include "tp/framework/report/plots.h"
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
      .pin_memory(device.is_cuda())
      .on_bad_sample(c.data.on_bad_sample == "skip" ? BadSamplePolicy::kSkip : BadSamplePolicy::kFail);
}

}  // namespace

Trainer::Trainer(const RunConfig& config, RunComponents& parts, c10::Device device, Logger& logger,
                 std::filesystem::path run_dir, DistContext* dist)
    : config_(config),
      parts_(parts),
      device_(device),
      log_(logger),
      run_dir_(std::move(run_dir)),
      dist_(dist),
      rank_(dist != nullptr ? dist->rank() : 0),
      world_size_(dist != nullptr ? dist->world_size() : 1),
      writes_(rank_ == 0 && !config.train.fast_dev_run),
      epochs_(config.train.fast_dev_run ? 1 : config.train.epochs),
      precision_(parse_precision(config.amp.precision)),
      scaler_(GradScalerOptions()
                  .init_scale(config.amp.init_scale)
                  .growth_factor(config.amp.growth_factor)
                  .backoff_factor(config.amp.backoff_factor)
                  .growth_interval(config.amp.growth_interval)
                  .enabled(needs_grad_scaler(precision_))),
      history_(run_dir_, writes_),
      progress_(config.progress.mode, config.progress.every_seconds, rank_ == 0),
      checkpoints_(run_dir_ / "checkpoints", config.checkpoint, writes_),
      early_stopping_(config.early_stopping),
      nan_checks_(nan_checks(precision_, device.type(), config.train.nan_policy)),
      report_(device) {
  check_precision_supported(precision_, device_);
  apply_switches();
  init_model();
  init_dist();
  const TrainSection& t = config_.train;
  const bool overfit = t.overfit_batches > 0;
  LoaderOptions train_options = loader_options(config_, t.batch_size, LoaderMode::kTrain, rank_, world_size_, device_);
  if (overfit) train_options.shuffle(false); // the same N batches every epoch
  train_loader_ = std::make_unique<DataLoader>(parts_.train_data, train_options);
  train_batches_ = train_loader_->batches_per_epoch();
  if (overfit) {
    if (t.overfit_batches > train_batches_)
      throw ConfigError("train.overfit_batches", "train.overfit_batches = " + std::to_string(t.overfit_batches) +
                                                     " but the training split has only " + std::to_string(train_batches_) +
                                                     " batches of " + std::to_string(t.batch_size) + ". Lower it.");
    train_batches_ = t.overfit_batches;
    eval_batches_ = t.overfit_batches;
  }
  if (t.fast_dev_run) {
    train_batches_ = std::min(train_batches_, t.grad_accum_steps); // one optimizer step
    eval_batches_ = 1;
  }
  init_schedule();
  if (overfit) {
    // Validate on exactly the samples trained on: the training split, unshuffled, same batches.
    val_loader_ = std::make_unique<DataLoader>(
        parts_.train_data, loader_options(config_, t.batch_size, LoaderMode::kEvalExact, rank_, world_size_, device_));
    log_.info("overfit_batches: training and validating on the first " + std::to_string(t.overfit_batches) +
              " training batches; the loss should approach zero");
  } else if (parts_.val_data && config_.eval.strategy != "no") {
    const int64_t eval_batch = config_.eval.batch_size > 0 ? config_.eval.batch_size : t.batch_size;
    val_loader_ = std::make_unique<DataLoader>(
        parts_.val_data, loader_options(config_, eval_batch, LoaderMode::kEvalExact, rank_, world_size_, device_));
  }
  if (t.fast_dev_run) log_.info("fast_dev_run: one optimizer step and one evaluation batch; nothing is written");
}

Trainer::~Trainer() = default;

void Trainer::init_schedule() {
  const ScheduleSection& s = config_.schedule;
  SchedulerOptions o;
  o.name = s.name;
  o.warmup_steps = s.warmup_steps;
  o.warmup_start_factor = s.warmup_start_factor;
  o.min_lr = {s.min_lr};
  // one_cycle peaks each parameter group in proportion to its own lr ([[optim.param_groups]]),
  // as passing a per-group max_lr list to torch.optim.lr_scheduler.OneCycleLR does.
  const double peak = s.max_lr > 0 ? s.max_lr : config_.optim.lr;
  o.max_lr.clear();
  for (const auto& group : optim_.optimizer->param_groups())
    o.max_lr.push_back(peak * group.options().get_lr() / config_.optim.lr);
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
  const int64_t total = total_optimizer_steps(epochs_, train_batches_, config_.train.grad_accum_steps);
  scheduler_ = make_scheduler(o, *optim_.optimizer, total);
  log_.info("schedule " + s.name + " over " + std::to_string(total) + " optimizer steps; precision " +
            std::string(to_string(precision_)));
}

void Trainer::init_model() {
  parts_.model->to_device(device_, c10::kFloat);
  for (auto& metric : parts_.metrics) metric->to_device(device_);
  model_state_ = parts_.model->state(); // after to_device: handles from before are invalid
  if (config_.run.channels_last) {
    // What Python's module.to(memory_format=torch.channels_last) does: swap each 4-D tensor's
    // storage in place (set_data), so the plugin's own handles see the new layout.
    c10::NoGradGuard no_grad;
    for (auto& s : model_state_)
      if (s.tensor.dim() == 4) s.tensor.set_data(s.tensor.contiguous(at::MemoryFormat::ChannelsLast));
  }
  if (config_.activation_checkpointing) {
    parts_.model->set_activation_checkpointing(true);
    log_.info("activation checkpointing: on (the model's declared blocks are recomputed in backward)");
  }

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
  const int64_t first_step = step_; // a resumed run reports only the steps it ran
  check_same_position();
  defer(dispatch(TP_EVENT_FIT_BEGIN, {}));
  try {
    for (epoch_ = start_epoch_; epoch_ < epochs_ && !stop_requested_; ++epoch_) {
      train_epoch(epoch_);
      end_epoch(epoch_);
    }
  } catch (const std::exception& e) {
    // Callbacks see the failure (to flush their own logs) before it propagates; a callback that
    // fails here must not hide the original error.
    try {
      dispatch(TP_EVENT_EXCEPTION, {}, e.what());
    } catch (const std::exception& ignored) {
      log_.warn(std::string("a callback failed while handling an exception: ") + ignored.what());
    }
    throw;
  }
  // The run ends evaluated and saved at its final step, whatever the strategies' intervals.
  if (val_loader_ && config_.eval.strategy == "steps" && last_eval_step_ != step_) run_evaluation();
  if (config_.checkpoint.strategy != "no" && last_save_step_ != step_) save(true, epoch_, 0);
  if (std::exchange(save_requested_, false) && last_save_step_ != step_) save_position(epoch_, 0);
  if (config_.checkpoint.load_best_at_end && !config_.train.fast_dev_run) load_best();
  summary.loaded_best = config_.checkpoint.load_best_at_end && checkpoints_.best().has_value();
  dispatch(TP_EVENT_FIT_END, last_eval_);
  draw_plots();
  summary.epochs = epoch_;
  summary.steps = step_;
  summary.last_eval = last_eval_;
  summary.best = checkpoints_.best().value_or(std::numeric_limits<double>::quiet_NaN());
  summary.stopped_early = stop_requested_;
  summary.stop_reason = stop_reason_;
  summary.skipped_steps = skipped_steps_;
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (step_ > first_step) log_.info(report_.summary(step_ - first_step, summary.seconds));
  if (dist_) dist_->barrier("end of training"); // rank 0 has finished writing when any rank returns
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
    int64_t batches = 0;
    while (auto cpu_batch = val_loader_->next()) {
      if (cpu_batch->empty()) { // every sample skipped: nothing to evaluate, but it is a batch
        if (++batches == eval_batches_) break;
        continue;
      }
      const NamedTensors batch = to_device(std::move(*cpu_batch));
      const NamedTensors outputs = parts_.model->forward(batch);
      const LossTerms terms = parts_.loss->forward(outputs, batch);
      loss_sum.add_(terms.sum.to(at::kDouble));
      count.add_(terms.count.to(at::kDouble));
      for (auto& metric : parts_.metrics) metric->update(outputs, batch);
      if (++batches == eval_batches_) break; // overfit_batches / fast_dev_run
    }
  }
  reduce_eval(loss_sum, count); // data-parallel: every sample counted once over all ranks
  Scalars result;
  result.emplace_back("val/loss", (loss_sum / count).item<double>()); // sync, once per evaluation
  for (auto& metric : parts_.metrics)
    for (const auto& [name, value] : metric->compute()) result.emplace_back("val/" + name, value);
  parts_.model->set_training(true);
  return result;
}

Scalars Trainer::run_evaluation() {
  Scalars eval = evaluate();
  last_eval_ = eval;
  last_eval_step_ = step_;
  monitor_value_.reset();
  for (const auto& [name, value] : eval) {
    if (name == config_.schedule.monitor) scheduler_->step_metric(value);
    if (name == config_.checkpoint.monitor) monitor_value_ = value;
  }
  if (!monitor_value_ && config_.checkpoint.save_top_k > 0 && !config_.train.fast_dev_run) {
    std::string names;
    for (const auto& [name, value] : eval) names += (names.empty() ? "" : ", ") + name;
    throw ConfigError("checkpoint.monitor", "checkpoint.monitor = \"" + config_.checkpoint.monitor +
                                                "\" is not among the evaluated values (" + names +
                                                "). Set it to one of them, or checkpoint.save_top_k = 0.");
  }
  const uint32_t requests = agree(dispatch(TP_EVENT_EVAL_END, eval));
  if (requests & TP_REQUEST_STOP) request_stop();
  if (requests & TP_REQUEST_SAVE) save_requested_ = true; // the caller saves at its position
  if (auto reason = early_stopping_.update(eval)) {
    // Decided from the evaluation, which every rank computes from the same reduced values.
    stop_requested_ = true;
    stop_reason_ = "early stopping: " + *reason;
    log_.info(stop_reason_);
  }
  if (config_.eval.strategy == "steps") {
    HistoryRecord record{"eval", {{"step", double(step_)}, {"epoch", double(epoch_)}}};
    record.values.insert(record.values.end(), eval.begin(), eval.end());
    history_.add(record);
  }
  return eval;
}

bool Trainer::due(const std::string& strategy, int64_t every, bool at_epoch_end, int64_t epoch) const {
  if (strategy == "steps") return !at_epoch_end && step_ % every == 0;
  if (strategy != "epoch" || !at_epoch_end) return false;
  return (epoch + 1) % every == 0 || epoch + 1 == epochs_ || stop_requested_;
}

void Trainer::end_epoch(int64_t epoch) {
  const auto [epoch_sum, epoch_count] = global_sums(epoch_loss_sum_, epoch_count_);
  if (!std::isfinite(epoch_sum) && nan_checks_.at_read)
    throw Error("the training loss became non-finite in epoch " + std::to_string(epoch + 1) +
                ". Lower optim.lr, check the data for NaN/Inf, or clip gradients (train.max_grad_norm).");
  const double train_loss = epoch_sum / epoch_count;
  epoch_loss_sum_.zero_();
  epoch_count_.zero_();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start_).count();
  Scalars eval;
  if (val_loader_ && due(config_.eval.strategy, config_.eval.every, true, epoch)) eval = run_evaluation();
  const double lr = current_lr(*optim_.optimizer);
  HistoryRecord record{"epoch",
                       {{"epoch", double(epoch + 1)},
                        {"step", double(step_)},
                        {"lr", lr},
                        {"train/loss", train_loss},
                        {"time/epoch_s", seconds},
                        {"time/data_wait_fraction", seconds > 0 ? epoch_wait_s_ / seconds : 0.0},
                        {"throughput/samples_per_s", seconds > 0 ? double(epoch_samples_) / seconds : 0.0}}};
  // data.on_bad_sample = "skip": how many training samples this rank dropped, and the first few.
  if (const int64_t skipped = train_loader_->skipped_count(); config_.data.on_bad_sample == "skip") {
    record.values.emplace_back("data/skipped_samples", double(skipped));
    std::string note = "epoch " + std::to_string(epoch + 1) + ": skipped " + std::to_string(skipped) + " bad samples";
    for (const SkippedSample& s : train_loader_->first_skipped()) note += "\n  index " + std::to_string(s.index) + ": " + s.message;
    if (skipped > 0) log_.warn(note);
  }
  for (const auto& value : eval) record.values.push_back(value);
  history_.add(record);
  history_.flush_csv();
  Scalars summary{{"train/loss", train_loss}};
  summary.insert(summary.end(), eval.begin(), eval.end());
  progress_.end_epoch(summary);
  std::string line = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(epochs_);
  for (const auto& [name, value] : summary) line += " " + name + "=" + format_number(value);
  line += " time=" + format_number(seconds) + "s data_wait=" +
          std::to_string(static_cast<int>(seconds > 0 ? 100.0 * epoch_wait_s_ / seconds : 0.0)) + "%";
  log_.file_only(line);
  const uint32_t requests = agree(dispatch(TP_EVENT_EPOCH_END, summary));
  if (requests & TP_REQUEST_STOP) request_stop();
  if (requests & TP_REQUEST_SAVE) save_requested_ = true;
  const bool periodic = due(config_.checkpoint.strategy, config_.checkpoint.every, true, epoch);
  if (periodic || last_eval_step_ == step_) save(periodic, epoch + 1, 0);
  if (std::exchange(save_requested_, false)) save_position(epoch + 1, 0);
  if (!eval.empty()) draw_plots();
}

void Trainer::draw_plots() {
  if (!writes_ || !config_.plots.enabled) return;
  // About 0.1-0.3 s on this thread for a 10k-step history (docs/plots.md); a plotting failure
  // (a missing cairo driver) must never stop training.
  try {
    draw_run_plots(run_dir_);
  } catch (const std::exception& e) {
    log_.warn(std::string("plots were not drawn: ") + e.what());
  }
}

void Trainer::request_stop() {
  stop_requested_ = true;
  if (stop_reason_.empty()) stop_reason_ = "a callback requested a stop";
}

void Trainer::defer(uint32_t requests) { pending_requests_ |= requests; }

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
  for (auto& [name, tensor] : batch) {
    // Pinned host memory (the loader pins on CUDA) makes this copy asynchronous.
    if (!device_.is_cpu()) tensor = tensor.to(device_, /*non_blocking=*/true);
    if (config_.run.channels_last && tensor.dim() == 4 && tensor.is_floating_point())
      tensor = tensor.contiguous(at::MemoryFormat::ChannelsLast);
  }
  return batch;
}

void Trainer::apply_switches() {
  // Every switch is set explicitly, on or off, so nothing depends on what ran before in this
  // process; the effective values are recorded next to config.toml.
  auto& context = at::globalContext();
  const bool benchmark = config_.run.cudnn_benchmark && !config_.run.deterministic;
  if (config_.run.cudnn_benchmark && config_.run.deterministic)
    log_.warn("run.cudnn_benchmark is ignored because run.deterministic = true (autotuning picks "
              "algorithms by timing, which is not reproducible)");
  context.setBenchmarkCuDNN(benchmark);
  context.setAllowTF32CuBLAS(config_.run.tf32);
  context.setAllowTF32CuDNN(config_.run.tf32);
  if (!writes_) return;
  std::ostringstream text;
  text << "# Effective runtime settings of this run (written by the host; informational).\n"
       << "device = \"" << device_.str() << "\"\n"
       << "precision = \"" << to_string(precision_) << "\"\n"
       << "world_size = " << world_size_ << "\n"
       << "intra_op_threads = " << at::get_num_threads() << "\n"
       << "deterministic = " << (context.deterministicAlgorithms() ? "true" : "false") << "\n"
       << "channels_last = " << (config_.run.channels_last ? "true" : "false") << "\n"
       << "cudnn_benchmark = " << (benchmark ? "true" : "false") << "\n"
       << "tf32 = " << (config_.run.tf32 ? "true" : "false") << "\n"
       << "non_blocking_copies = " << (device_.is_cuda() ? "true" : "false") << "\n"
       << "activation_checkpointing = " << (config_.activation_checkpointing ? "true" : "false") << "\n"
       << "libtorch = \"" << TORCH_VERSION << "\"\n";
  write_file_atomically(run_dir_ / "runtime.toml", text.str());
}

}  // namespace tp
