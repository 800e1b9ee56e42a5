// The one place a command builds a run from its loaded config (docs/architecture.md, run steps 4
// and 5): the weights it starts from, the process settings (ARCH-17), the datasets prepared and
// created, the other components, the initial weights. `host train`, `eval`, `predict` and `verify`
// call it; `host tune` and `host sweep` build each trial and cell through a `host train` child,
// so through it as well; `host profile`, which builds the model alone, applies the same process
// settings (apply_process_settings).
#pragma once

#include <c10/core/Device.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "session.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/dist/collectives.h"
#include "tp/framework/engine/run_components.h"

namespace tp::cli {

/// What a command asks of the run it assembles.
struct RunRequest {
  std::string command{}; ///< "host train": names the command in messages
  DatasetSplits splits{}; ///< the dataset splits to prepare and create
  /// The checkpoint the run starts from: eval and predict's --checkpoint file, train's --resume
  /// path; empty: none. Loaded before anything else, so that a missing or damaged file stops the
  /// command before any dataset is prepared.
  std::filesystem::path start_from{};
  /// train --resume auto: start from the newest checkpoint of the run directory that loads, if any.
  bool resume_auto = false;
  /// With resume_auto: the run directory's run.id (read_run_id), so that another run's newer
  /// checkpoints are passed over; "" takes any.
  std::string recorded_run_id{};
  /// Fill the model from train.init_weights on a fresh start (train, verify); resuming ignores it.
  bool initial_weights = false;
  /// Appended to the message of a SIGINT/SIGTERM that arrives while the datasets are prepared or
  /// the components created ("; nothing was written.", its punctuation included); empty: the
  /// command does not stop there.
  std::string stopped_note{};
  /// The val split's table instead of the configuration's (host predict --images: the evaluation
  /// table reading the listed files); the session's configuration stays as it was read.
  std::optional<ComponentConfig> val_table{};
};

/// A run ready for its command: the components created, on the CPU until the command places
/// them (the Trainer, BatchPlacement).
struct AssembledRun {
  c10::Device device;        ///< cuda:LOCAL_RANK under data parallelism, else run.device resolved
  RunComponents parts;
  std::filesystem::path start_path;             ///< the start checkpoint's file; empty on a fresh start
  std::optional<LoadedCheckpoint> start;        ///< that checkpoint, loaded
  /// The run's one Collectives (make_collectives over the session's process group, the identity
  /// for a single process): the Trainer, evaluate_checkpoint and predict make every collective
  /// through it.
  std::unique_ptr<Collectives> collectives;
};

/// [all ranks] Builds the run `request` asks for from `session`'s config, in this order: the start
/// checkpoint (found and loaded), the process settings (ARCH-17, apply_process_settings, with
/// this node's ranks sharing its cores), the datasets' prepare entries (PLG-17, once per node),
/// the components (run_components.h; LibTorch's generator seeded with run.seed), the initial
/// weights. Logs each step. Throws ConfigError, CheckpointError, PluginError, and Interrupted
/// (stop_signal.h) where `request.stopped_note` asks for it.
AssembledRun assemble_run(Session& session, const RunRequest& request);

}  // namespace tp::cli
