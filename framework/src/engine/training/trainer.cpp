#include "engine/training/trainer_impl.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/optim/optimizer.h>

#include <limits>
#include <utility>

#include "engine/training/batchnorm_refresh.h"
#include "engine/training/cuda_graph_policy.h"
#include "engine/training/frozen_batchnorms.h"
#include "engine/training/nan_policy.h"
#include "engine/training/run_budget.h"
#include "engine/setup/image_decode_choice.h"
#include "engine/setup/training_loaders.h"
#include "engine/setup/runtime_toml.h"
#include "tp/framework/config/monitor_mode.h"
#include "tp/framework/error.h"
#include "tp/framework/optim/device_step.h"
#include "tp/framework/report/plots.h"
#include "tp/framework/util/atomic_file.h"
#include "tp/framework/util/short_number.h"

namespace tp {
namespace {

/// optim.layer_decay's effect in one line: the number of groups and the lr range, each end with a
/// parameter it applies to (train.log, so a user sees which layers learn slowest).
std::string describe_layer_decay(const BuiltOptimizer& built, double decay) {
  const auto& groups = built.optimizer->param_groups();
  size_t low = 0, high = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i].options().get_lr() < groups[low].options().get_lr()) low = i;
    if (groups[i].options().get_lr() > groups[high].options().get_lr()) high = i;
  }
  return "optim.layer_decay = " + short_number(decay) + ": " + std::to_string(groups.size()) +
         " parameter groups, lr from " + short_number(groups[low].options().get_lr()) + " ('" +
         built.group_names[low].front() + "') to " + short_number(groups[high].options().get_lr()) + " ('" +
         built.group_names[high].front() + "')";
}

}  // namespace

Trainer::Impl::Impl(const RunConfig& config, RunComponents& parts, c10::Device device, Logger& logger,
                    std::filesystem::path run_dir, std::unique_ptr<Collectives> collectives)
    : config_(config),
      parts_(parts),
      device_(device),
      log_(logger),
      run_dir_(std::move(run_dir)),
      collectives_(collectives ? std::move(collectives) : single_process_collectives(device)),
      rank_(collectives_->rank()),
      world_size_(collectives_->world_size()),
      writes_(rank_ == 0 && !config.train.fast_dev_run),
      epochs_(config.train.fast_dev_run ? 1 : config.train.epochs),
      precision_(config.amp.precision),
      budget_(config.train.fast_dev_run ? 0 : config.train.max_steps, config.train.max_time_seconds),
      placement_(device, config.run.channels_last, config.data.device_prefetch),
      meters_(device, *collectives_, nan_checks(precision_, device.type(), config.train.nan_policy)),
      update_(config, optim_, model_state_, device, logger),
      steps_(config, parts, model_state_, optim_, update_, placement_, meters_, logger, *collectives_),
      events_(parts.callbacks),
      control_(*collectives_, budget_, config.train.max_time),
      history_(run_dir_, writes_),
      tensorboard_(run_dir_, writes_ && config.logging.tensorboard, config.logging.tensorboard_images, logger),
      progress_(config.progress.mode, config.progress.every_seconds, rank_ == 0),
      trace_(config.run.trace_steps, device, run_dir_ / "trace" / "rank0.json", logger, writes_),
      checkpoints_(run_dir_ / "checkpoints", config.checkpoint, writes_),
      provenance_(collect_provenance(parts, config)) {
  require_monitor_directions(config_); // a mode left "auto" by a name that says neither
  check_precision_supported(precision_, device_);
  history_.listen([this](const HistoryRecord& record) { tensorboard_.add(record); });
  if (writes_ && config.logging.tensorboard_images && !(config.logging.tensorboard && config.plots.enabled))
    log_.warn("logging.tensorboard_images = true adds nothing: the images are plots/*.png, so it needs "
              "logging.tensorboard = true and plots.enabled = true.");
  // The process settings (ARCH-17) were applied by the command; their effective values are
  // recorded next to config.toml once the run has started (record_runtime): a start-up that fails
  // (or `host eval`) leaves the run's runtime.toml as the run that trained wrote it.
  if (writes_) runtime_ = RuntimeRecord(runtime_toml_text(config_, device_, precision_, world_size_), provenance_toml(provenance_));
  init_model();
  init_dist();
  init_cuda_graphs();
  // The loaders and their limits (engine/setup/training_loaders.h); the schedule's length between them.
  TrainingLoader train = make_training_loader(config_, parts_, device_, rank_, world_size_, log_);
  train_loader_ = std::move(train.loader);
  train_batches_ = train.batches;
  // train.max_steps overrides train.epochs: as many epochs as its steps need, the last one cut short.
  epochs_ = budget_.epochs(epochs_, total_optimizer_steps(1, train_batches_, config_.train.grad_accum_steps));
  init_schedule();
  EvaluationLoader val = make_evaluation_loader(config_, parts_, train, device_, rank_, world_size_, log_);
  record_decode(train.decode, val.decode ? &*val.decode : nullptr);
  evaluator_ = std::make_unique<Evaluator>(config_, parts_, placement_, std::move(val.loader), val.batches, *collectives_);
  // A min_epochs no run reaches holds every early stop back for good (fine-tune trial F8).
  if (evaluator_->early_stopping_enabled() && config_.early_stopping.min_epochs > epochs_)
    log_.warn("early_stopping.min_epochs = " + std::to_string(config_.early_stopping.min_epochs) + " is past the run's " +
              std::to_string(epochs_) + " epochs: early stopping will hold every stop back (but a non-finite "
              "monitor's). Lower min_epochs, or raise train.epochs.");
  // [ema], [swa]: the update's averages of the weights, evaluated after the live ones (SWA first).
  update_.create_averages(epochs_);
  for (const WeightAverage* average : {update_.swa(), update_.ema()})
    if (average != nullptr) evaluator_->add_average(*average, model_state_);
  if (config_.train.fast_dev_run) log_.info("fast_dev_run: one optimizer step and one evaluation batch; nothing is written");
}

Trainer::Impl::~Impl() = default;

void Trainer::Impl::init_cuda_graphs() {
  CudaGraphFacts facts;
  facts.cuda_device = device_.is_cuda();
  facts.cuda_build = TP_TORCH_DEVICE_BUILD == 2;
  facts.world_size = world_size_;
  facts.optimizer = config_.optim.name;
  facts.optimizer_has_fused_kernel = has_fused_kernel(config_.optim.name);
  facts.device_step_optimizer = device_step(*optim_.optimizer) != nullptr;
  facts.nan_policy = config_.train.nan_policy;
  facts.on_oom = config_.train.on_oom;
  facts.activation_checkpointing = config_.activation_checkpointing;
  facts.model_id = parts_.model->id();
  // Asked only when graphs are wanted: the plugin's answer may cost it some inspection.
  if (config_.run.cuda_graphs != CudaGraphMode::kOff) facts.model_blocker = parts_.model->graph_capture_blocker();
  facts.dataset_id = parts_.train_data->id();
  facts.variable_fields = parts_.train_data->batch_layout().describe();
  facts.cycles_momentum = cycles_momentum(config_.schedule);
  steps_.prepare_cuda_graphs(facts);
  record_cuda_graph_state();
}

void Trainer::Impl::record_decode(const DecodeChoice& train, const DecodeChoice* val) {
  log_.info("data.decode: train " + train.state + (val != nullptr ? "; val " + val->state : ""));
  if (config_.data.decode == DecodeMode::kCpu || !writes_) return;
  runtime_.add(decode_table(config_, train, val));
  write_runtime_toml();
}

void Trainer::Impl::record_cuda_graph_state() {
  std::optional<std::string> table = steps_.take_cuda_graph_report();
  if (!table) return;
  runtime_.set_cuda_graphs(std::move(*table));
  write_runtime_toml();
}

void Trainer::Impl::write_runtime_toml() {
  const std::string text = runtime_.text();
  if (!writes_ || text.empty()) return;
  // Informational, rewritten whole (atomically), the graph table last.
  control_.rank0_write([&] { write_file_atomically(run_dir_ / "runtime.toml", text); });
}

void Trainer::Impl::record_runtime() {
  runtime_.start();
  write_runtime_toml();
}

void Trainer::Impl::init_schedule() {
  SchedulerOptions o = options_for_groups(config_.schedule, *optim_.optimizer, config_.optim.lr);
  // Time is optimizer steps: a window of grad_accum_steps micro-batches is one step, and the
  // epoch's short last window counts too (ARCH-10).
  const int64_t total = budget_.total_steps(total_optimizer_steps(epochs_, train_batches_, config_.train.grad_accum_steps));
  // interval "epoch", warmup_epochs and cooldown_epochs count epochs of this many steps.
  const int64_t per_epoch = total_optimizer_steps(1, train_batches_, config_.train.grad_accum_steps);
  // fast_dev_run is a smoke test of one step: a real run's warm-up (configs/recipe_resnet.toml's
  // 2000 steps) must not make it refuse. Any other run too short for its warm-up is refused
  // (make_scheduler says what to change).
  if (config_.train.fast_dev_run)
    if (const std::string capped = fit_schedule_to_smoke_run(o, total, per_epoch); !capped.empty()) log_.warn(capped);
  update_.set_schedule(make_scheduler(o, *optim_.optimizer, total, per_epoch));
  // ABI 1.14: the model's per-step hook learns the same total the schedule spans (a momentum
  // teacher's cosine schedule ends where the lr's does).
  if (parts_.model->has_after_optimizer_step()) {
    update_.set_after_step([this, total](int64_t step) { parts_.model->after_optimizer_step(step, total); });
    log_.info("model " + parts_.model->id() + ": after_optimizer_step is called after each of the " +
              std::to_string(total) + " optimizer steps");
  }
  log_.info("schedule " + describe_schedule(o, total, per_epoch) + "; precision " + std::string(to_string(precision_)));
}

void Trainer::Impl::init_model() {
  model_state_ = placement_.place_model(*parts_.model);
  for (auto& metric : parts_.metrics) metric->to_device(device_);
  if (config_.activation_checkpointing) {
    parts_.model->set_activation_checkpointing(true);
    log_.info("activation checkpointing: on (the model's declared blocks are recomputed in backward)");
  }

  if (config_.freeze_bn_stats) {
    // Refused together: update_bn would recompute the statistics this keeps as loaded.
    if (config_.swa.enabled && config_.swa.update_bn)
      throw ConfigError("model.freeze_bn_stats",
                        "model.freeze_bn_stats = true keeps the BatchNorm statistics as loaded, and swa.update_bn = "
                        "true recomputes them for the averaged weights at the end: choose one (set swa.update_bn = "
                        "false to keep the frozen statistics, or drop freeze_bn_stats).");
    parts_.model->set_batchnorm_frozen(true);
    log_.info("freeze_bn_stats: the model's BatchNorm layers normalise with their running statistics and keep them");
  }

  // [[optim.param_groups]] freeze_bn_stats: some layers' statistics kept (a teacher in the model).
  if (const std::vector<std::string> layers = frozen_batchnorm_layers(model_state_, config_.optim.param_groups);
      !layers.empty()) {
    if (config_.swa.enabled && config_.swa.update_bn)
      throw ConfigError("optim.param_groups",
                        "[[optim.param_groups]] freeze_bn_stats = true keeps some BatchNorm statistics as loaded, and "
                        "swa.update_bn = true recomputes every BatchNorm layer's for the averaged weights at the end: "
                        "choose one (set swa.update_bn = false, or drop freeze_bn_stats).");
    parts_.model->set_batchnorm_frozen_at(layers, "optim.param_groups");
    log_.info("freeze_bn_stats: " + std::to_string(layers.size()) + " BatchNorm layer" +
              (layers.size() == 1 ? "" : "s") + " (" + layers.front() + (layers.size() > 1 ? ", ..." : "") +
              ") normalise with their running statistics and keep them");
  }

  LayerDepths depths;
  if (config_.optim.layer_decay < 1) depths = parts_.model->layer_depths();
  optim_ = make_optimizer(config_.optim, model_state_, &depths);
  update_.select_agc_parameters();  // a train.agc_ignore glob that matches nothing fails here, not at step 1
  if (const std::string twice = double_clip_warning(config_.optim, config_.train.max_grad_norm); !twice.empty())
    log_.warn(twice);
  for (const auto& group : optim_.optimizer->param_groups())
    group_lrs_differ_ |= group.options().get_lr() != current_lr(*optim_.optimizer);
  if (!depths.empty()) log_.info(describe_layer_decay(optim_, config_.optim.layer_decay));
  // [[optim.param_groups]] freeze = true: in the optimizer, but without gradients until their
  // unfreeze epoch (train_epoch re-applies this for every epoch, a resumed one included).
  set_frozen(optim_, 0);
  int64_t parameters = 0, trainable = 0;
  for (const auto& s : model_state_)
    if (!s.is_buffer) {
      parameters += s.tensor.numel();
      if (s.tensor.requires_grad()) trainable += s.tensor.numel();
    }
  log_.info("model " + parts_.model->id() + ": " + std::to_string(parameters) + " parameters (" +
            std::to_string(trainable) + " trainable) on " + device_.str());
  // Every parameter frozen at the start: the first backward would fail on LibTorch's "element 0 of
  // tensors does not require grad" (init-weights fixer's finding); say which setting does it.
  if (trainable == 0 && !optim_.frozen.empty())
    throw ConfigError("optim.param_groups",
                      "[[optim.param_groups]] with freeze = true match every parameter of the model at the start (" +
                          std::to_string(parameters) + " parameters, none trainable in epoch 1): the loss would have "
                          "nothing to train. Narrow the frozen groups' patterns so some parameters train (a new head, "
                          "e.g. pattern = \"fc.*\" left out), or give a group unfreeze_at_epoch = 1.");
}

FitSummary Trainer::Impl::fit() {
  const double start = active_seconds(); // measured_seconds: suspensions left out (active_clock.h)
  FitSummary summary;
  summary.monitor = config_.checkpoint.monitor;
  const int64_t first_step = step(); // a resumed run reports only the steps it ran
  const int64_t first_collective = collectives_->calls();
  check_same_position();
  tensorboard_.start(config_.resolved); // after resume_from, which chose the file to continue
  budget_.start();
  // A run early stopping ended is over when resumed (--resume auto on a requeued job), as one
  // that trained every epoch is: before, it trained one more epoch to stop again.
  if (auto reason = evaluator_->early_stopping_ended_run(position_.start.epoch))
    control_.stop_for(StopCause::kEarlyStopping,
                      "early stopping had ended this run at step " + std::to_string(step()) + ": " + *reason +
                          "; nothing more to train (raise early_stopping.patience or move the threshold named, "
                          "or turn them off, to train on)");
  // Sanity check: a few evaluation batches before the first step, so a broken evaluation fails
  // now instead of after an epoch of training (not under fast_dev_run, which evaluates at once).
  if (evaluator_->enabled() && config_.eval.sanity_batches > 0 && !config_.train.fast_dev_run && !control_.stop() &&
      position_.start.epoch < epochs_) {
    log_.info("sanity check: evaluating " + std::to_string(config_.eval.sanity_batches) +
              " batch(es) of the validation split before training (eval.sanity_batches; 0 = off)");
    evaluator_->sanity_check(config_.eval.sanity_batches);
  }
  control_.defer(dispatch(TP_EVENT_FIT_BEGIN, {}));
  try {
    for (position_.epoch = position_.start.epoch; position_.epoch < epochs_ && !control_.stop(); ++position_.epoch) {
      train_epoch(position_.epoch);
      end_epoch(position_.epoch);
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
  // The run ends evaluated and saved at its final step, whatever the strategies' intervals. A
  // paused run (train.max_time, a callback's stop inside an epoch) is not finished: it saves
  // where it stopped, inside its epoch, with checkpoint.strategy = "no" too (as a signal does:
  // its message promises a resume). A process that trained no step (a finished or early-stopped
  // run resumed) does none of it: the process that trained did, and a save here would rewrite
  // last.pt at another position.
  const std::optional<ResumePosition>& paused = control_.pause();
  // An epoch ended here counts as training: a run resumed at its last epoch's last batch (a stop
  // signal at that step or during that epoch end's evaluation) trains no step, yet ends the run.
  const bool trained = step() > first_step || position_.epoch > position_.start.epoch;
  const ResumePosition resume = paused.value_or(ResumePosition{position_.epoch, 0});
  const bool run_end = trained && !paused;
  const bool swa_final = run_end && update_.finish_swa([&] {
    return refresh_batchnorm_statistics(parts_, model_state_, *train_loader_, static_cast<uint64_t>(epochs_),
                                        train_batches_, placement_, *collectives_);
  });
  const bool steps_eval_due = run_end && config_.eval.strategy == IntervalStrategy::kSteps && !evaluator_->evaluated_at(step());
  // The loop ended at an epoch boundary: the last step trained in the epoch before position_.epoch.
  if (evaluator_->enabled() && (swa_final || steps_eval_due))
    run_evaluation(/*epoch_line_follows=*/false, position_.epoch - 1);
  if (trained && paused && config_.checkpoint.strategy == IntervalStrategy::kNo)
    save(SaveKind::kPosition, resume);
  else if (trained && config_.checkpoint.strategy != IntervalStrategy::kNo &&
           (swa_final || position_.last_periodic_save != step()))
    save(SaveKind::kPeriodic, resume);
  else if (trained && config_.checkpoint.strategy != IntervalStrategy::kNo && config_.checkpoint.save_last &&
           (position_.last_periodic_at.epoch != resume.epoch || position_.last_periodic_at.batch != resume.batch))
    // A step save at the last epoch's last step stands before that epoch's end (its evaluation,
    // its record): last.pt moves past it, or a requeued finished run would end the epoch again
    // (without last.pt, a resume from the step file ends it again and its history stays right).
    save(SaveKind::kPosition, resume);
  if (trained && position_.last_periodic_save != step()) save_if_requested(resume);
  summary.loaded_best = config_.checkpoint.load_best_at_end && !config_.train.fast_dev_run && load_best();
  trace_.finish(step());
  dispatch(TP_EVENT_FIT_END, evaluator_->last());
  // history.csv follows the epochs' ends; the records after the last one (a final evaluation of
  // eval.strategy = "steps" or SWA's, a paused run's steps) reach it here.
  control_.rank0_write([&] { history_.flush_csv(); });
  draw_plots(/*final=*/true);
  control_.rank0_write([&] { tensorboard_.finish(step(), evaluator_->last()); });
  summary.epochs = paused && paused->batch > 0 ? paused->epoch : position_.epoch; // epochs completed
  summary.steps = step();
  summary.last_eval = evaluator_->last();
  summary.best = checkpoints_.best().value_or(std::numeric_limits<double>::quiet_NaN());
  // A stop at the last epoch's end (a callback at its EPOCH_END, early stopping at its
  // evaluation) came when the run had nothing left to train.
  summary.stopped_early = control_.stopped_early() && (paused || position_.epoch < epochs_);
  summary.stop_reason = summary.stopped_early ? control_.reason() : "";
  summary.skipped_steps = steps_.skipped_steps();
  summary.scaler_skipped_steps = update_.scaler_skipped_steps();
  if (update_.scaler().is_enabled()) report_scaler_skips(step() - first_step);
  summary.seconds = active_seconds() - start;
  if (step() > first_step) log_.info(meters_.report().summary(step() - first_step, summary.seconds));
  if (const BatchStage* stage = train_loader_->stage(); stage != nullptr) log_.info(stage->summary());
  // The same report as numbers for `host compare`; written last, after the final save.
  // The collectives this process made (Collectives::calls: the gradient buckets' all-reduce
  // excluded; a single process counts the calls a data-parallel run would make).
  // A process that trained nothing (a finished run requeued) leaves the report of the one that
  // did (experiment trial F7: its peak memory and step times were replaced by an idle process's).
  std::error_code no_report;
  if (writes_ && (trained || !std::filesystem::exists(run_dir_ / "report.toml", no_report))) control_.rank0_write([&] {
    write_file_atomically(run_dir_ / "report.toml",
                          meters_.report().to_toml({summary.epochs, summary.steps, budget_.elapsed()},
                                                   step() - first_step, summary.seconds) +
                              "collectives = " + std::to_string(collectives_->calls() - first_collective) + "\n" +
                              // Paused (train.max_time, a callback's stop inside an epoch) exits 0
                              // like a finished run: a requeue script tells them apart here
                              // (cluster trial F12; docs/training.md "Stopping and resuming").
                              (paused ? "paused = true\n" : std::string()) +
                              (update_.scaler().is_enabled()
                                   ? "scaler_skipped_steps = " + std::to_string(summary.scaler_skipped_steps) + "\n"
                                   : std::string()));
  });
  // Also the barrier of the run's end: rank 0 has finished writing when any rank returns.
  control_.settle_writes("end of training: agree that rank 0's files are written");
  return summary;
}

void Trainer::Impl::report_scaler_skips(int64_t steps) const {
  const int64_t skipped = update_.scaler_skipped_steps();
  const std::string line = "amp: the fp16 grad scaler skipped " + std::to_string(skipped) + " of " +
                           std::to_string(steps) + " optimizer steps (inf/NaN gradients; amp/skipped_steps in the history)";
  if (skipped <= scaler_skip_warning_threshold(steps)) {
    log_.info(line);
    return;
  }
  log_.warn(line + ": more than a scale that settles skips. Those steps trained nothing; look for activations that "
                   "overflow fp16 (amp/scale falling step after step), lower optim.lr, or train in bf16 "
                   "(amp.precision = \"bf16\") where the device has it.");
}

void Trainer::Impl::draw_plots(bool final) {
  if (!writes_ || !config_.plots.enabled || !plot_clock_.due(config_.plots.min_interval_s, final)) return;
  // About 0.1-0.3 s on this thread for a 10k-step history (docs/plots.md); a plotting failure
  // (a missing cairo driver) must never stop training.
  try {
    tensorboard_.add_images(draw_run_plots(run_dir_), step());
  } catch (const std::exception& e) {
    log_.warn(std::string("plots were not drawn: ") + e.what());
  }
  plot_clock_.drawn();
}

uint32_t Trainer::Impl::dispatch(int32_t kind, const Scalars& scalars, const std::string& message) {
  return events_.dispatch(kind, step(), position_.epoch, current_lr(*optim_.optimizer), scalars, message);
}

// The public face (trainer.h): every call is Impl's.
Trainer::Trainer(const RunConfig& config, RunComponents& parts, c10::Device device, Logger& logger,
                 std::filesystem::path run_dir, std::unique_ptr<Collectives> collectives)
    : impl_(std::make_unique<Impl>(config, parts, device, logger, std::move(run_dir), std::move(collectives))) {}
Trainer::~Trainer() = default;
FitSummary Trainer::fit() { return impl_->fit(); }
void Trainer::resume_from(const LoadedCheckpoint& checkpoint) { impl_->resume_from(checkpoint); }
const std::string& Trainer::run_id() const noexcept { return impl_->run_id(); }
bool Trainer::finished() const { return impl_->finished(); }
void Trainer::set_run_id(std::string id) { impl_->set_run_id(std::move(id)); }
void Trainer::record_runtime() { impl_->record_runtime(); }
std::vector<StateRole> Trainer::state_roles(ResumePosition resume) { return impl_->state_roles(resume); }
CheckpointContents Trainer::checkpoint_contents(ResumePosition resume) { return impl_->checkpoint_contents(resume); }

}  // namespace tp
