// TensorBoard output of a run (`[logging] tensorboard = true`, docs/logging.md): rank 0 writes
// <run dir>/tensorboard/events.out.tfevents.<time>.<host> as training runs, one TFRecord per
// event, each handed to the OS as soon as it is built (a crash loses nothing):
//   - every value of every history record, at the record's optimizer step: a `step` record's
//     values under their own names (train/loss, lr, time/compute_s), any other kind's under
//     <kind>/<name> (epoch/val/accuracy, eval/val/loss), so no tag holds two series;
//   - the resolved config as markdown text (tag `config`), and the hparams plugin's session start
//     with every scalar of the config;
//   - at the end of a finished run, the final metrics as final/<name> scalars, the hparams
//     experiment naming them as its metrics, and the session end;
//   - with `tensorboard_images = true`, the plots/*.png after each redraw (tags plots/<name>).
// A write failure (a full disk) is a warning, once; the writer then stays silent for the rest of
// the run, and training, history.jsonl and checkpoints carry on: a dashboard is never a reason
// to lose a run.
//
// Example (the Trainer's use):
//   TensorBoardWriter tensorboard(run_dir, /*enabled=*/true, /*images=*/false, log);
//   tensorboard.resume(step, history.records());  // only when resuming
//   tensorboard.start(config.resolved);
//   tensorboard.add(record);                      // for every history record
//   tensorboard.finish(step, final_metrics);
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "tp/framework/monitor/history.h"
#include "tp/framework/monitor/tensorboard_events.h"

namespace tp {

class Logger;

class TensorBoardWriter {
 public:
  /// `enabled` = false (ranks other than 0, logging.tensorboard off) makes every call a no-op.
  /// `images`: add_images() writes the PNGs. Nothing touches the disk before start().
  TensorBoardWriter(const std::filesystem::path& run_dir, bool enabled, bool images, Logger& log);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  /// Resuming at optimizer step `step` (call before start(), after History::resume): rewrites
  /// every event file of the run, each atomically, keeping only events at steps <= `step`
  /// (without the run-level summaries, which start() and finish() write again), so no reader sees
  /// a step twice, and at `step` itself only the events of records in `kept` (a history that
  /// drops an epoch's end written after the save at its last step drops its events too); start()
  /// then appends to the newest file. `kept` are the history records the
  /// resumed run keeps: any of them the files lack (no event file yet, logging turned on only
  /// now, a write failure earlier) are written again, with the current wall time.
  void resume(int64_t step, const std::vector<HistoryRecord>& kept);
  /// Opens the event file (a new one, or the resumed run's) and writes the config text and the
  /// hparams session start. `config` is the resolved configuration (RunConfig::resolved).
  void start(const toml::table& config);
  /// Writes one history record as one event of scalars (see the file comment for the tags). A
  /// record without a "step" value is skipped: it has no place on TensorBoard's x axis.
  void add(const HistoryRecord& record);
  /// Writes the charts just redrawn at optimizer step `step`, one image per file (tag
  /// plots/<file stem>). Only with `images`; a redraw at a step already written is skipped, so
  /// no image tag holds a step twice.
  void add_images(const std::vector<std::filesystem::path>& pngs, int64_t step);
  /// The run finished at `step`: writes `final_metrics` (the last evaluation) and the last epoch's
  /// train/loss as final/<name>, the hparams experiment with those as its metrics, and the
  /// hparams session end.
  void finish(int64_t step, const std::vector<std::pair<std::string, double>>& final_metrics);
  /// The event file being written; empty before start() and when disabled.
  const std::filesystem::path& file() const { return file_; }

 private:
  /// Runs `body`; a failure is logged once (naming `what` and the error) and disables the writer.
  template <class Body>
  void guarded(const char* what, Body&& body);
  void append(const std::string& event);
  bool active() const { return enabled_ && fd_ >= 0; }

  std::filesystem::path dir_; ///< <run dir>/tensorboard
  bool enabled_, images_;
  Logger& log_;
  int fd_ = -1; ///< the event file, opened O_APPEND; -1 before start() and after a failure
  std::filesystem::path file_;
  std::optional<int64_t> resume_step_;
  std::vector<HistoryRecord> backfill_;  ///< kept history records the event files lack
  int64_t last_image_step_ = -1;         ///< the newest step holding images
  std::optional<double> epoch_train_loss_; ///< the last epoch record's train/loss
  std::vector<HParam> hparams_;          ///< the config's scalars (session start, experiment)
};

}  // namespace tp
