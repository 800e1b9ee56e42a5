// Checkpoints: what a run saves and how it is written.
//
// Format: one pickle (torch::pickle_save) of a dict, so Python reads it with
// `torch.load(path)` and C++ with torch::pickle_load:
//   format: "torchhost-checkpoint/1"
//   model: {name: tensor}            parameters and buffers as the model plugin visits them
//   optimizer: uint8 tensor          torch::optim archive bytes (param groups in build order)
//   optimizer_groups: [[names]]      which parameters each group holds
//   scheduler: float64 tensor        LrScheduler::state() (exact continuation)
//   scaler: {scale, growth_tracker}  fp16 grad scaler state (PyTorch GradScaler field names)
//   epoch, batch: int                where training resumes: epoch (0-based) and batch within it
//   step: int                        optimizer steps taken
//   world_size: int                  ranks of the run that wrote it (its sampler positions)
//   rng_cpu: uint8 tensor            the CPU generator's state (dropout, init)
//   rng_cuda: uint8 tensor           the training device's generator state (CUDA runs only)
//   running_loss: float64 tensor     [epoch sum, epoch count, window sum, window count]
//                                    the training-loss accumulators of a partly done epoch
//   early_stopping: float64 tensor   [best, evaluations without improvement, stopped by a
//                                    non-finite value (0/1; absent before 2026-11-28)] (empty when off)
//   monitor: str, best: float        the monitored value and the best seen so far
//   config: str                      the resolved run config (TOML text)
//   plugins: [str]                   "component-id@version" of every component used
//   ema, swa: {name: tensor}         the averaged weights ([ema], [swa]; docs/weight_averaging.md)
//   ema_updates, swa_updates: int    updates folded into each average (AveragedModel.n_averaged)
//   swa_schedule: float64 tensor     SWALR's LrScheduler::state() (absent before SWA starts)
//   train_seconds: float             training time so far, resumes included (train.max_time)
//   micro_batch_splits: int          pieces each micro-batch is cut into (train.on_oom = "split"; 1)
//   provenance: str                  what made the run (engine/setup/provenance.h: host build, LibTorch,
//                                    plugin files and their SHA-256, command line, host, env); TOML
//   run_id: str                      the identity of the run that saved it (run_identity.h); absent
//                                    in files written before identities
//   class_field: str, classes: [str] the training data's label field and the names of its classes
//                                    (plugin ABI 1.12, data/class_names.h); absent when the dataset
//                                    lent none, and in files written before
//   history_records: int             records history.jsonl held at the save; a resume keeps no more
//                                    (absent in files written before)
//   eval_pending: int                an evaluation a stop signal abandoned, which a resume runs
//                                    first: 1 the step's (eval.strategy = "steps"), 2 the epoch
//                                    end's (SWA's fold of that epoch done); absent when none
//   train_samples: int               the training split's sample count; a resume inside an epoch
//                                    needs the same (absent in files written before)
//   epoch_skipped: int               bad samples every rank skipped in the saved epoch before its
//                                    position (data.on_bad_sample = "skip"); absent when 0
// Writes are atomic: a temporary file in the same directory, fsync, rename, fsync of the
// directory. A crash at any moment leaves the previous file intact and loadable. Every file is
// sealed with a CRC-32C in its zip comment (checkpoint_seal.h), verified before every load.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tp/framework/checkpoint/checkpoint_seal.h"
#include "tp/framework/data/class_names.h"
#include "tp/framework/plugin/plugin_instance.h"
#include "tp/framework/util/atomic_file.h"

namespace torch::optim {
class Optimizer;
}

namespace tp {

/// Where a stopped run continues: epoch (0-based) and batch within it (a checkpoint's `epoch` and
/// `batch`).
struct ResumePosition {
  int64_t epoch = 0;
  int64_t batch = 0;
};

inline constexpr const char* kCheckpointFormat = "torchhost-checkpoint/1";

/// Tensors by name, as a checkpoint stores them.
using NamedWeights = std::vector<std::pair<std::string, at::Tensor>>;

/// An averaged copy of the weights (WeightAverage) as a checkpoint holds it.
struct SavedAverage {
  std::string name;     ///< "ema" | "swa": the checkpoint key
  NamedWeights weights; ///< CPU tensors, named as the model's state
  int64_t updates = 0;  ///< updates folded in
};

/// Everything a checkpoint holds besides the model and optimizer tensors; written and read back
/// unchanged (see the format above).
struct CheckpointState {
  std::vector<double> scheduler_state;
  double scaler_scale = 0.0;
  int64_t scaler_growth_tracker = 0;
  int64_t epoch = 0;
  int64_t batch = 0;
  int64_t step = 0;
  int64_t world_size = 1; ///< ranks that wrote it: epoch/batch positions are per-rank shards
  at::Tensor rng_cpu;
  at::Tensor rng_cuda; ///< undefined unless the run trained on CUDA
  /// Training-loss accumulators: epoch sum, epoch count, logging-window sum, window count.
  std::vector<double> running_loss;
  /// EarlyStopping::state(): best value and evaluations without improvement; empty when off.
  std::vector<double> early_stopping;
  std::string monitor;
  double best = 0.0;
  std::string config_toml;
  std::vector<std::string> plugins;
  std::vector<double> swa_schedule; ///< SWALR's LrScheduler::state(); empty before SWA starts
  double train_seconds = 0.0;       ///< training time so far, resumes included (train.max_time)
  int64_t micro_batch_splits = 1;   ///< pieces per micro-batch after out-of-memory splits (train.on_oom)
  std::string provenance_toml;      ///< engine/setup/provenance.h's [provenance] table; "" in older files
  std::string run_id;               ///< the saving run's identity (run_identity.h); "" in older files
  ClassNames classes;               ///< the training data's class names (ABI 1.12); empty in older files
  /// Records history.jsonl held when it was saved; -1 in older files. A save at an epoch's last
  /// step stands before the epoch's end, whose records a resume drops and writes again.
  int64_t history_records = -1;
  /// An evaluation a stop signal abandoned (Evaluator::Pending as a number): 0 none, 1 the
  /// step's, 2 the epoch end's. A resume runs it before anything else.
  int64_t eval_pending = 0;
  /// The training split's sample count when it was saved; -1 in older files. A resume inside an
  /// epoch needs the same count: the epoch's order is drawn from it.
  int64_t train_samples = -1;
  /// Training samples every rank skipped (data.on_bad_sample = "skip") in the saved epoch before
  /// its position, so the resumed epoch reports them all; 0 at an epoch's start and in older files.
  int64_t epoch_skipped = 0;
};

/// What save_checkpoint() writes: the state plus borrowed views of the trainer's tensors.
struct CheckpointContents : CheckpointState {
  const std::vector<StateTensor>* model_state = nullptr;
  const torch::optim::Optimizer* optimizer = nullptr; ///< may be null (eval-only exports)
  std::vector<std::vector<std::string>> optimizer_groups;
  /// Averaged weights ([ema], [swa]): name, borrowed tensors, updates folded in.
  struct Average {
    std::string name;
    const std::vector<StateTensor>* state = nullptr;
    int64_t updates = 0;
  };
  std::vector<Average> averages;
};

/// Writes `contents` to `path` atomically. Throws tp::Error naming the path and the OS error
/// (disk full, permission) and removes the temporary file; the previous `path` is untouched.
void save_checkpoint(const std::filesystem::path& path, const CheckpointContents& contents);

/// A checkpoint read back.
struct LoadedCheckpoint : CheckpointState {
  NamedWeights model;
  std::vector<char> optimizer_archive;
  std::vector<SavedAverage> averages; ///< in the order saved; empty without [ema]/[swa]

  /// The average called `name`, or null when the checkpoint has none.
  const SavedAverage* average(const std::string& name) const;
  /// The weights `which` selects: "live" (the model entry) or an average's name ("ema", "swa").
  /// Throws ConfigError(`option`) naming the averages the file does hold when it has no such entry.
  const NamedWeights& weights(const std::string& which, const std::string& option) const;
  /// The weights the saving run's checkpoint.monitor measured: an average's name ("ema", "swa")
  /// when `monitor` is one of its metrics (val_ema/..., val_swa/...: best.pt is the best of those
  /// weights) and the file holds that average with at least one update, else "live". `host eval`,
  /// `predict` and `export` take these when --weights is not given.
  std::string monitored_weights() const;
};

/// Reads `path`. Throws CheckpointError (exit 4) naming the file when it is missing, truncated,
/// damaged (its CRC-32C differs from the one sealed in at save), not a torchhost checkpoint or of
/// an unknown format version; a safetensors file (an export) is named as one, with what to use
/// instead, never as a damaged checkpoint; so is a readable PyTorch file that is no torchhost
/// checkpoint (a plain state_dict, a timm or Lightning checkpoint), with the train.init_weights
/// settings that start a run from its weights. Cost beyond the read: one checksum pass (checkpoint_seal.h).
LoadedCheckpoint load_checkpoint(const std::filesystem::path& path);

/// load_checkpoint() of bytes already in memory; `name` is used in messages. The checkpoint fuzzer
/// drives this: any input gives a checkpoint or a CheckpointError, never a crash.
LoadedCheckpoint read_checkpoint(const std::vector<char>& bytes, const std::string& name);

/// Copies `checkpoint.model` into `model_state` in place (names must match one to one, shapes
/// equal). Throws ConfigError (exit 2, key `model`) listing missing, unexpected and mis-shaped
/// entries: the configuration's model is not the one that wrote the checkpoint.
void restore_model_state(const LoadedCheckpoint& checkpoint, const std::vector<StateTensor>& model_state);

/// Copies `saved` into `model_state` in place, as restore_model_state does; copies nothing when
/// names or shapes do not match.
void restore_weights(const NamedWeights& saved, const std::vector<StateTensor>& model_state);

}  // namespace tp
