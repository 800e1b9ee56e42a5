#include "engine/setup/training_loaders.h"

#include <algorithm>
#include <string>

#include "tp/framework/engine/loader_options.h"
#include "tp/framework/error.h"

namespace tp {

TrainingLoader make_training_loader(const RunConfig& config, RunComponents& parts, c10::Device device, int rank,
                                    int world, Logger& log) {
  const TrainSection& t = config.train;
  LoaderOptions options = loader_options(config, t.batch_size, LoaderMode::kTrain, rank, world, device);
  if (t.overfit_batches > 0) options.shuffle(false); // the same N batches every epoch
  TrainingLoader out;
  // data.decode: the training images decoded on the device or on the loader threads (runtime.toml's [decode]).
  out.decode = choose_image_decode(config, device, *parts.train_data, "train", config.data.num_workers,
                                   "nothing was trained");
  out.loader = std::make_unique<DataLoader>(parts.train_data, options, out.decode.stage);
  out.batches = out.loader->batches_per_epoch();
  if (const std::size_t groups = parts.train_data->sample_groups().size(); groups > 0)
    log.info("training order: " + std::to_string(parts.train_data->size()) + " samples in " +
             std::to_string(groups) + " groups (plugin ABI 1.10), the groups shuffled every epoch and the samples " +
             "within windows of " + std::to_string(config.data.group_window) + " groups (data.group_window)" +
             (world > 1 ? "; each rank reads one contiguous run of them" : ""));
  // Every rank sees the same split size and batch, so every rank refuses alike (no collective needed).
  if (out.batches == 0)
    throw ConfigError("train.batch_size",
                      "train.batch_size = " + std::to_string(t.batch_size) + " on " + std::to_string(world) +
                          " rank(s), but the training split has " + std::to_string(parts.train_data->size()) +
                          " samples: not one full batch per epoch (the training loader drops an incomplete last "
                          "batch), so no step would train. Lower train.batch_size or use more training data; "
                          "nothing was trained and no checkpoint written.");
  if (t.overfit_batches > 0) {
    if (t.overfit_batches > out.batches)
      throw ConfigError("train.overfit_batches", "train.overfit_batches = " + std::to_string(t.overfit_batches) +
                                                     " but the training split has only " + std::to_string(out.batches) +
                                                     " batches of " + std::to_string(t.batch_size) + ". Lower it.");
    out.batches = t.overfit_batches;
  }
  // Lightning's limit_train_batches: the epoch ends early; the loader still shuffles the whole
  // split, so each epoch trains on another subset. The schedule counts these epochs' steps.
  if (t.limit_batches > 0 && t.overfit_batches == 0) out.batches = std::min(out.batches, t.limit_batches);
  if (t.fast_dev_run) out.batches = std::min(out.batches, t.grad_accum_steps); // one optimizer step
  return out;
}

EvaluationLoader make_evaluation_loader(const RunConfig& config, RunComponents& parts, const TrainingLoader& train,
                                        c10::Device device, int rank, int world, Logger& log) {
  const TrainSection& t = config.train;
  EvaluationLoader out;
  if (config.eval.limit_batches > 0) out.batches = config.eval.limit_batches;
  if (t.overfit_batches > 0) out.batches = t.overfit_batches;
  if (t.fast_dev_run) out.batches = 1;
  if (config.eval.strategy == IntervalStrategy::kNo) return out; // no evaluation, no sanity check either
  if (t.overfit_batches > 0) {
    // Validate on exactly the samples trained on: the training split, unshuffled, same batches.
    out.loader = std::make_unique<DataLoader>(
        parts.train_data, loader_options(config, t.batch_size, LoaderMode::kEvalExact, rank, world, device),
        train.decode.stage);
    log.info("overfit_batches: training and validating on the first " + std::to_string(t.overfit_batches) +
             " training batches; the loss should approach zero");
  } else if (parts.val_data) {
    out.decode = choose_image_decode(config, device, *parts.val_data, "val", config.data.num_workers,
                                     "nothing was trained");
    out.loader = std::make_unique<DataLoader>(
        parts.val_data, loader_options(config, evaluation_batch_size(config), LoaderMode::kEvalExact, rank, world, device),
        out.decode->stage);
  }
  return out;
}

}  // namespace tp
