// The trainer's checkpoint side: what a checkpoint holds, when and under which names it is
// saved (through CheckpointManager), and how a run continues from one. Kept apart from
// trainer.cpp so each file reads as one concern.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <optional>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/checkpoint/run_identity.h"
#include "tp/framework/config/config_changes.h"
#include "tp/framework/config/write.h"
#include "engine/training/finite_weights.h"
#include "engine/training/trainer_impl.h"
#include "tp/framework/error.h"
#include "tp/framework/util/short_number.h"

namespace tp {
namespace {

at::Tensor generator_state(c10::Device device) {
  at::Generator generator =
      device.is_cpu() ? at::detail::getDefaultCPUGenerator() : at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex()); // the generator is shared process-wide
  return generator.get_state();
}

void set_generator_state(c10::Device device, const at::Tensor& state) {
  at::Generator generator =
      device.is_cpu() ? at::detail::getDefaultCPUGenerator() : at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

}  // namespace

void Trainer::Impl::save(SaveKind kind, ResumePosition resume) {
  // train.fast_dev_run writes nothing, whatever asks (a signal, a callback's request included).
  if (config_.train.fast_dev_run) return;
  if (kind != SaveKind::kPosition && config_.checkpoint.strategy == IntervalStrategy::kNo) return;
  // Best: only an evaluation taken at this very step describes these weights.
  const std::optional<double> monitor =
      kind == SaveKind::kPosition ? std::nullopt : evaluator_->monitor_at(step());
  if (kind == SaveKind::kBest && !(monitor && checkpoints_.qualifies(*monitor))) return;
  sync_batchnorm_stats(); // all ranks: the statistics rank 0 writes are the agreed ones
  refuse_non_finite_weights();
  const bool periodic = kind == SaveKind::kPeriodic;
  if (periodic) {
    position_.last_periodic_save = step();
    position_.last_periodic_at = resume;
  }
  meters_.gather_running_loss(); // all ranks: a collective under data-parallel training
  position_.skipped_at_save = resume.batch > 0 ? skipped_over_ranks() : 0;
  std::vector<std::filesystem::path> written;
  control_.rank0_write([&] {
    if (kind == SaveKind::kPosition) {
      if (!writes_) return;
      written.push_back(run_dir_ / "checkpoints" / "last.pt");
      save_checkpoint(written.back(), checkpoint_contents(resume));
    } else if (writes_) {
      written = checkpoints_.save(checkpoint_contents(resume), step(), periodic, monitor);
    } else {
      checkpoints_.save(CheckpointContents{}, step(), periodic, monitor); // same ranking, no files
    }
  });
  control_.settle_writes("agree that the checkpoint was written");
  for (const auto& path : written) {
    Scalars value;
    if (monitor && path.filename().string().starts_with("best")) value.emplace_back(config_.checkpoint.monitor, *monitor);
    control_.defer(dispatch(TP_EVENT_CHECKPOINT_SAVE, value, path.string()) & TP_REQUEST_STOP);
  }
}

int64_t Trainer::Impl::skipped_over_ranks() {
  // A resume inside the epoch reports the skips before it too (data trial F1: the resumed epoch's
  // data/skipped_samples said 0 where the uninterrupted run's said 4).
  if (config_.data.on_bad_sample != BadSamplePolicy::kSkip) return 0;
  const auto options = at::TensorOptions().dtype(at::kDouble).device(collectives_->device());
  std::vector<at::Tensor> count{at::tensor({static_cast<double>(rank_skipped_samples())}, options)};
  collectives_->all_reduce_sum(count, "sum the epoch's skipped training samples for the checkpoint");
  return static_cast<int64_t>(count.front().cpu().item<double>());
}

void Trainer::Impl::refuse_non_finite_weights() {
  // Every save: the weights, the EMA and the SWA average it would write, read once on the host
  // and agreed (the ranks hold the same weights, but a save is a decision all of them make).
  std::vector<const std::vector<StateTensor>*> saved{&model_state_};
  for (const WeightAverage* average : update_.averages()) saved.push_back(&average->state());
  bool finite = true;
  for (const auto* state : saved) finite = finite && (all_finite(*state).item<bool>() || exactly_finite(*state));
  const uint32_t mine = finite ? 0u : 1u;
  if (collectives_->agree(mine, "agree that the weights to save are finite") == 0) return;
  // Where they became so, without guessing at a cause the run did not have (migration trial F3
  // was told of train.init_weights it never set and of checkpoints it never wrote).
  const int64_t first = update_.weights_watch().first_non_finite_step();
  const std::string& init = config_.train.init_weights;
  const std::string since =
      first > 0         ? "the update of step " + std::to_string(first) + " left them non-finite"
      : !init.empty()   ? "no update made them so: they were non-finite as loaded from train.init_weights = " + init
                        : "no update made them so: a forward wrote a non-finite buffer, such as a BatchNorm statistic";
  const std::filesystem::path dir = run_dir_ / "checkpoints";
  const std::string earlier = checkpoint_names(run_dir_).empty()
                                  ? "No checkpoint was written before this one."
                                  : "Every checkpoint already in " + dir.string() +
                                        " holds finite weights, and --resume auto continues from the newest.";
  throw Error("not saving the checkpoint of step " + std::to_string(step()) + ": the model's weights are inf or NaN (" +
              since + "). " + earlier + " The run diverged: lower optim.lr, "
              "add warm-up ([schedule]), clip gradients (train.max_grad_norm), or check the data for NaN/Inf.");
}

void Trainer::Impl::save_if_requested(ResumePosition resume) {
  if (control_.take_save()) save(SaveKind::kPosition, resume);
}

bool Trainer::Impl::load_best() {
  if (!checkpoints_.best()) { // the same ranking on every rank
    log_.warn("checkpoint.load_best_at_end: no best checkpoint was saved (is checkpoint.save_top_k 0, or was the run "
              "never evaluated?); keeping the final weights");
    return false;
  }
  const auto path = run_dir_ / "checkpoints" / "best.pt";
  // Data-parallel: only rank 0 reads the file (the run directory may be local to its node); the
  // others take its weights by broadcast. Whether it loads is rank 0's to say and every rank's
  // to hear: a rank that went on to the broadcast alone would wait there for dist.timeout_s.
  std::optional<LoadedCheckpoint> best;
  std::string problem;
  if (rank_ == 0) {
    if (!std::filesystem::exists(path)) problem = path.string() + " is gone (removed after it was saved?)";
    else try {
        best = load_checkpoint(path);
      } catch (const Error& e) {
        problem = e.what();
      }
  }
  if (collectives_->agree(problem.empty() ? 0u : 1u, "agree whether best.pt loads") != 0) {
    log_.warn("checkpoint.load_best_at_end: " + (problem.empty() ? "rank 0 could not load best.pt" : problem) +
              "; every rank keeps the final weights");
    return false;
  }
  // A monitor on averaged weights (val_ema/..., val_swa/...) makes the best weights the
  // average's: they become the model's (the final evaluation is theirs, as val/*).
  std::string which = "live";
  for (const WeightAverage* average : update_.averages())
    if (config_.checkpoint.monitor.starts_with("val_" + average->name() + "/")) which = average->name();
  if (best) {
    restore_weights(best->weights(which, "checkpoint.monitor"), model_state_);
    control_.defer(dispatch(TP_EVENT_CHECKPOINT_LOAD, {{config_.checkpoint.monitor, best->best}}, path.string()) &
                   TP_REQUEST_STOP);
    log_.info("load_best_at_end: loaded " + std::string(which != "live" ? "the " + which + " weights of " : "") +
              path.string() + " (" + config_.checkpoint.monitor + " = " + short_number(best->best) + ", step " +
              std::to_string(best->step) + ")");
  }
  broadcast_model();
  if (evaluator_->enabled()) {
    const Scalars eval = evaluator_->evaluate();
    evaluator_->set_last(eval);
    // The run ends with these weights: their evaluation is the history's last record, of its own
    // kind "best" with the step the weights were saved at, so that neither a plot nor host
    // compare's "final" takes it for the last step's (experiments trial F6; docs/run_directory.md).
    HistoryRecord record{"best", {{"step", double(step())}, {"epoch", double(std::max<int64_t>(0, position_.epoch - 1))}}};
    if (best) record.values.emplace_back("best_step", double(best->step));
    record.values.insert(record.values.end(), eval.begin(), eval.end());
    control_.rank0_write([&] { history_.add(record); });
  }
  return true;
}

std::vector<StateRole> Trainer::Impl::state_roles(ResumePosition resume) {
  std::vector<StateRole> roles;
  // Where the run continues: the loader's position, the ranks that wrote it, the generators.
  roles.push_back({"position",
                   [this, resume](CheckpointContents& into) {
                     into.epoch = resume.epoch;
                     into.batch = resume.batch;
                     into.world_size = world_size_;
                     into.train_samples = static_cast<int64_t>(parts_.train_data->size());
                     into.epoch_skipped = position_.skipped_at_save;
                     into.rng_cpu = generator_state(c10::Device(c10::kCPU));
                     // Dropout on the GPU draws from the device's generator: part of an exact resume too.
                     if (device_.is_cuda()) into.rng_cuda = generator_state(device_);
                   },
                   [this](const LoadedCheckpoint& from) {
                     // The saved (epoch, batch) position counts batches of a per-rank shard: with
                     // another number of ranks it points elsewhere in the data.
                     if (from.world_size != world_size_)
                       throw ConfigError("--resume", "the checkpoint was written by a run of " +
                                                         std::to_string(from.world_size) + " rank(s) and this run has " +
                                                         std::to_string(world_size_) +
                                                         "; its position in the epoch would not match the data. Resume "
                                                         "with " + std::to_string(from.world_size) +
                                                         " rank(s) (--nproc-per-node), or start a new run from its "
                                                         "weights with train.init_weights = \"<checkpoint>\".");
                     // The batch index counts batches of the saved size: with another, it points at
                     // other samples (the cluster trial's F5: skipped or repeated samples, or a
                     // DataLoader error past the epoch's end). At an epoch's start it points nowhere.
                     const std::vector<std::string> moved =
                         from.batch > 0 ? changes_a_mid_epoch_resume_refuses(from.config_toml, to_toml_text(config_.resolved))
                                        : std::vector<std::string>{};
                     if (!moved.empty())
                       throw ConfigError("train.batch_size",
                                         "--resume: " + moved.front() + " since the checkpoint, which stopped inside epoch " +
                                             std::to_string(from.epoch + 1) + " after " + std::to_string(from.batch) +
                                             " batch(es) of the old size: resumed with another size, the epoch would "
                                             "skip or repeat samples. Resume with the checkpoint's batch size, or start a new "
                                             "run from its weights with train.init_weights.");
                     // The epoch's order is a permutation of the split's count: with another count
                     // the saved batch index points at other samples (data trial F8: files added
                     // to the folder resumed silently, some samples twice and others never).
                     const auto samples = static_cast<int64_t>(parts_.train_data->size());
                     if (from.batch > 0 && from.train_samples >= 0 && from.train_samples != samples)
                       throw ConfigError("--resume", "the checkpoint stopped inside epoch " + std::to_string(from.epoch + 1) +
                                                         " after " + std::to_string(from.batch) +
                                                         " batch(es) of a training split of " +
                                                         std::to_string(from.train_samples) + " samples, which now has " +
                                                         std::to_string(samples) +
                                                         ": the epoch's order is drawn from the count, so resuming inside "
                                                         "it would train some samples twice and skip others. Restore the "
                                                         "data as it was to resume exactly; or resume from a checkpoint "
                                                         "saved at an epoch's end, or start a new run from these weights "
                                                         "with train.init_weights = \"<checkpoint>\".");
                     if (from.batch == 0 && from.train_samples >= 0 && from.train_samples != samples)
                       log_.info("resume: the training split has " + std::to_string(samples) + " samples, the checkpoint's run had " +
                                 std::to_string(from.train_samples) + "; the next epoch draws its order from the new count.");
                     position_.skipped_before_resume = rank_ == 0 ? from.epoch_skipped : 0;
                     if (from.rng_cpu.defined()) set_generator_state(c10::Device(c10::kCPU), from.rng_cpu);
                     if (from.rng_cuda.defined() && device_.is_cuda()) set_generator_state(device_, from.rng_cuda);
                     position_.start = {from.epoch, from.batch};
                     position_.epoch = from.epoch; // the events before the loop (checkpoint load, fit begin) say so
                   }});
  roles.push_back({"model", [this](CheckpointContents& into) { into.model_state = &model_state_; },
                   [this](const LoadedCheckpoint& from) {
                     try {
                       restore_model_state(from, model_state_);
                     } catch (const ConfigError& e) {
                       // The provenance role's warning comes after this one and is never reached:
                       // a model plugin rebuilt with other parameters is the likely cause, so say so.
                       for (const PluginChange& change : changed_plugins(from.provenance_toml, provenance_))
                         if (std::find(change.component_ids.begin(), change.component_ids.end(), parts_.model->id()) !=
                             change.component_ids.end())
                           throw ConfigError(e.key_path(),
                                             std::string(e.what()) + " The model's plugin file changed since the "
                                             "checkpoint was written, the likely cause: " + change.text +
                                             ". Resume with the plugin file the checkpoint was written with, or "
                                             "start a new run.");
                       throw;
                     }
                   }});
  roles.push_back({"step", [this](CheckpointContents& into) { steps_.save_state(into); },
                   [this](const LoadedCheckpoint& from) { steps_.load_state(from); }});
  roles.push_back({"update", [this](CheckpointContents& into) { update_.save_state(into); },
                   [this](const LoadedCheckpoint& from) { update_.load_state(from); }});
  roles.push_back({"averages", [this](CheckpointContents& into) { update_.save_averages(into); },
                   [this](const LoadedCheckpoint& from) { update_.load_averages(from); }});
  // The checkpoint holds the global sums (gather_running_loss); rank 0 carries them on.
  roles.push_back({"meters", [this](CheckpointContents& into) { into.running_loss = meters_.running_loss(); },
                   [this](const LoadedCheckpoint& from) { meters_.load_running_loss(from.running_loss, rank_ == 0); }});
  // With an evaluation a stop signal abandoned, which the resumed run owes first.
  roles.push_back({"evaluator",
                   [this](CheckpointContents& into) {
                     into.early_stopping = evaluator_->early_stopping_state();
                     into.eval_pending = static_cast<int64_t>(evaluator_->pending());
                   },
                   [this](const LoadedCheckpoint& from) {
                     evaluator_->load_early_stopping_state(from.early_stopping);
                     evaluator_->set_pending(static_cast<Evaluator::Pending>(from.eval_pending));
                   }});
  roles.push_back({"checkpoints",
                   [this](CheckpointContents& into) {
                     into.monitor = config_.checkpoint.monitor;
                     // An evaluation at this very step may make this save the best.
                     const std::optional<double> monitor = evaluator_->monitor_at(step());
                     const std::optional<double> best = monitor ? checkpoints_.best_including(*monitor) : checkpoints_.best();
                     into.best = best.value_or(std::numeric_limits<double>::quiet_NaN());
                   },
                   [this](const LoadedCheckpoint&) { checkpoints_.restore(); }}); // the ranking is best.tsv's
  // Rank 0's count (the only history written): a resume keeps no record the save did not see.
  roles.push_back({"history", [this](CheckpointContents& into) { into.history_records = history_.count(); },
                   [](const LoadedCheckpoint&) {}}); // read by resume_from, after the roles
  roles.push_back({"budget", [this](CheckpointContents& into) { budget_.save_state(into); },
                   [this](const LoadedCheckpoint& from) { budget_.load_state(from); }});
  // What made the run: a rebuilt plugin may compute something else, so continuing is allowed,
  // but not silently.
  roles.push_back({"provenance",
                   [this](CheckpointContents& into) {
                     into.config_toml = to_toml_text(config_.resolved);
                     into.plugins = parts_.plugin_versions;
                     into.provenance_toml = provenance_toml(provenance_);
                     // For `host export` and `host predict`, which read the checkpoint, not the data.
                     if (parts_.train_data) into.classes = parts_.train_data->class_names();
                   },
                   [this](const LoadedCheckpoint& from) {
                     // The run's lineage: runtime.toml and every later checkpoint name the
                     // processes that trained the steps before this one (hardening.md section 7).
                     provenance_ = with_earlier_segments(std::move(provenance_), from.provenance_toml, from.step, from.epoch);
                     runtime_.set_provenance(provenance_toml(provenance_));
                     for (const PluginChange& change : changed_plugins(from.provenance_toml, provenance_))
                       log_.warn("--resume: the plugin " + change.text + ". The run continues with the new binary; if its "
                                 "behaviour changed, the rest of the run differs from the one the checkpoint's run "
                                 "would have trained.");
                     for (const std::string& warning : changed_input_files(from.provenance_toml, provenance_))
                       log_.warn(warning);
                   }});
  // Whose checkpoint it is: a resumed run goes on as the run that saved it (older files have none).
  roles.push_back({"run_identity", [this](CheckpointContents& into) { into.run_id = run_id_; },
                   [this](const LoadedCheckpoint& from) {
                     if (!from.run_id.empty()) run_id_ = from.run_id;
                   }});
  return roles;
}

CheckpointContents Trainer::Impl::checkpoint_contents(ResumePosition resume) {
  CheckpointContents contents;
  for (const StateRole& role : state_roles(resume)) role.save(contents);
  return contents;
}

void Trainer::Impl::resume_from(const LoadedCheckpoint& c) {
  for (const StateRole& role : state_roles()) role.load(c);
  broadcast_model(); // a resumed data-parallel run loads, then takes rank 0's weights
  const std::optional<int64_t> saved_records =
      c.history_records >= 0 ? std::optional<int64_t>(c.history_records) : std::nullopt;
  for (const std::string& warning : history_.resume(c.step, saved_records)) log_.warn(warning);
  tensorboard_.resume(c.step, history_.records()); // drops events after c.step, as the history did
  control_.defer(dispatch(TP_EVENT_CHECKPOINT_LOAD, {{"step", double(c.step)}}) & TP_REQUEST_STOP);
  log_.info("resumed at epoch " + std::to_string(c.epoch + 1) + ", batch " + std::to_string(c.batch) + ", step " +
            std::to_string(c.step));
}

}  // namespace tp
