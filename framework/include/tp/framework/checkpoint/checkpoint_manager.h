// Which checkpoint files a run keeps (ModelCheckpoint): last.pt (the resume point), the K most
// recent numbered ones and the K best by the monitored value. Each save serialises the state once
// and gives that one file every name it needs by hard links, so keeping last, step-N and best
// costs one write, not three.
//
// Files in <run dir>/checkpoints/:
//   last.pt                    the latest save (checkpoint.save_last)
//   step-00000120.pt           numbered saves, the newest checkpoint.keep_last kept
//   best.pt                    the best by checkpoint.monitor (checkpoint.save_top_k >= 1)
//   best-step-00000080.pt      the save_top_k best, best.pt among them
//   best.tsv                   the best ranking (value, step, file), rewritten atomically; read
//                              back on resume so the ranking continues
// Only the writer (rank 0) touches files; the others keep the same ranking in memory so every
// rank takes the same decisions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/config/run_config.h"

namespace tp {

class CheckpointManager {
 public:
  /// `dir` is <run dir>/checkpoints (created on the first save); `writer` = rank 0.
  CheckpointManager(std::filesystem::path dir, CheckpointSection options, bool writer);

  /// Resuming: reloads the best ranking from best.tsv, dropping entries whose file is gone.
  void restore();

  /// True when `value` would enter the best-k: finite, save_top_k > 0, and better than the
  /// k-th best (or fewer than k kept).
  bool qualifies(double value) const;

  /// The best monitored value saved so far.
  std::optional<double> best() const;
  /// The best value once a save offering `value` is done: `value` when it qualifies and beats
  /// best(), else best().
  std::optional<double> best_including(double value) const;

  /// Saves `contents` (taken at optimizer step `step`) under the names this save earns:
  /// last.pt and step-N.pt when `periodic`, best files when `monitor_value` qualifies. Evicts
  /// numbered and best files beyond their limits. Returns the names written (empty on non-writers
  /// or when nothing is due). Throws tp::Error (disk full, permission) with every previous file
  /// intact.
  std::vector<std::filesystem::path> save(const CheckpointContents& contents, int64_t step, bool periodic,
                                          std::optional<double> monitor_value);

  /// The newest checkpoint in `dir` to resume from: last.pt, else the highest step-N.pt, else
  /// nothing. Does not open it; find_resume_point() also checks that it loads.
  static std::optional<std::filesystem::path> latest(const std::filesystem::path& dir);

  /// A checkpoint chosen to resume from, already loaded.
  struct ResumePoint {
    std::filesystem::path path;
    LoadedCheckpoint checkpoint;
    int skipped = 0;    ///< damaged files passed over to get here (0: the newest one loaded)
    int other_runs = 0; ///< newer files of another run passed over (run_id, run_identity.h)
  };

  /// `--resume auto`: the newest checkpoint in `dir` that loads. Tries last.pt, then step-N.pt
  /// and best-step-N.pt from the highest step down, then best.pt. A file that fails to load
  /// (CheckpointError) is reported through `warn` with the reason, and so is every other name
  /// hard-linked to the same file (one save has several names, so one damaged inode damages them
  /// all); the next genuinely different file is tried. With a `run_id` (the run directory's
  /// identity, run_identity.h), a file another run saved is passed over too, with a warning naming
  /// both identities; files without one (older hosts) are taken. Returns nullopt when `dir` holds
  /// no checkpoint; throws ConfigError("--resume") when every file that loads is another run's,
  /// and CheckpointError naming every file tried when none loads. Cost: one load per file tried.
  static std::optional<ResumePoint> find_resume_point(const std::filesystem::path& dir,
                                                      const std::function<void(const std::string&)>& warn,
                                                      const std::string& run_id = "");

 private:
  struct Ranked {
    double value;
    int64_t step;
    std::string file;
  };
  bool better(double a, double b) const;
  void evict_numbered();
  void write_ranking() const;
  /// Removes temporaries ("." names ending in a pid) left by writers that no longer run.
  void sweep_stale_temporaries() const;

  std::filesystem::path dir_;
  CheckpointSection options_;
  bool writer_;
  std::vector<Ranked> ranking_; ///< best first, at most save_top_k
  bool swept_ = false;          ///< stale temporaries removed (once, before the first save)
};

/// "step-00000120.pt": numbered checkpoint names sort by step.
std::string numbered_checkpoint_name(const std::string& prefix, int64_t step);

/// Whether `name` is one a run saves a checkpoint under: last.pt, best.pt, step-N.pt or
/// best-step-N.pt (what --resume auto considers; temporaries are not).
bool is_checkpoint_file_name(const std::string& name);

}  // namespace tp
