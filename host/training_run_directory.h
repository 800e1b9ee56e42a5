// `host train`'s run directory and the run's identity, one owner (docs/run_directory.md): which
// directory the run writes, whether it may (one training at a time, never over an earlier run's
// checkpoints unless --new-run sets them aside), the files that exist before training starts
// (config.toml, train.log, run.id), and which identity the run carries. The checkpoint side of
// the identity (every save carries it, a resume takes the checkpoint's) is the Trainer's.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "cli.h"
#include "session.h"
#include "tp/framework/util/file_lock.h"

namespace tp::cli {

class TrainingRunDirectory {
 public:
  /// [all ranks; rank 0 writes] Claims `session.run_dir` for the training `options` asks for, in
  /// this order: the directory made and run.lock taken (rank 0; held until this object goes), a
  /// symbolic link in place of checkpoints/, plots/, tensorboard/, mlflow/ or earlier/ refused
  /// (rank 0), a fresh run refused over an earlier run's checkpoints, and a `--resume FILE` of
  /// another run over the directory's run (rank 0; with --new-run, those files moved to
  /// earlier/<UTC time>/ instead; the other ranks judge none of it, so under run_agreed every
  /// rank stops with rank 0's reason), the plugin crash handler pointed at the directory, train.log
  /// opened, dead processes' temporaries swept and a fresh run's config.toml written (rank 0),
  /// and the directory's recorded identity read. Logs the run's line, and warns when every user
  /// may write the directory. Throws ConfigError ("--output-dir", "--resume", "run.output_dir")
  /// for a directory that cannot be used, is locked, holds a planted link or another run, and
  /// for a damaged run.id; CheckpointError for a --resume FILE that does not load, when it is
  /// read here. `session` must outlive the object.
  TrainingRunDirectory(Session& session, const Options& options);

  /// The identity run.id held when the run started ("" for none): --resume auto's filter.
  const std::string& recorded_run_id() const noexcept { return recorded_run_id_; }
  /// The resolved configuration as config.toml holds it.
  const std::string& config_text() const noexcept { return config_text_; }

  /// [rank 0 writes] A fresh start appends to the history a killed attempt may have left: a torn
  /// last line is dropped (with a warning). Nothing for a resumed run.
  void prepare_history(bool resumed) const;

  /// The run's identity, decided once the start checkpoint is restored: `checkpoint_run_id`
  /// (what the checkpoint carried; "" for none or a fresh start) when there is one, warning when
  /// the directory held another; a checkpoint from before identities continues the directory's
  /// recorded one; a fresh run draws a new one. Then rank 0 records it in run.id (not under
  /// train.fast_dev_run) and writes a resumed run's config.toml, now that the settings it
  /// continues with are known to start, unless `will_train` is false (a finished run requeued:
  /// config.toml keeps describing what trained).
  std::string settle_identity(const std::string& checkpoint_run_id, const std::filesystem::path& start_path,
                              bool will_train = true) const;

 private:
  Session& session_;
  bool rank0_;
  bool resuming_;             ///< --resume given: config.toml waits for settle_identity
  std::string config_text_;   ///< the resolved config, as config.toml holds it
  std::optional<FileLock> lock_;
  std::string recorded_run_id_;
};

}  // namespace tp::cli
