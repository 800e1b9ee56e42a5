#include "training_run_directory.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <system_error>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/checkpoint/run_identity.h"
#include "tp/framework/config/write.h"
#include "tp/framework/error.h"
#include "tp/framework/monitor/history.h"
#include "tp/framework/plugin/plugin_crash.h"
#include "tp/framework/util/append_file.h"
#include "tp/framework/util/atomic_file.h"
#include "tp/framework/util/bounded_text.h"
#include "tp/framework/util/first_few.h"
#include "tp/framework/util/own_directory.h"
#include "tp/framework/util/stale_temporaries.h"

namespace tp::cli {
namespace {

// An unusable --output-dir (a file, /proc, no permission) is a configuration error naming it,
// not an "unexpected error" from the first write into it.
void make_run_directory(const std::filesystem::path& run_dir) {
  std::error_code made;
  std::filesystem::create_directories(run_dir, made);
  if (made || !std::filesystem::is_directory(run_dir))
    throw ConfigError("--output-dir", "host train: cannot use " + run_dir.string() + " as the run directory (" +
                                          (made ? made.message() : std::string("it is not a directory")) +
                                          "). Choose another --output-dir (or run.output_dir); nothing was written.");
}

// One training per run directory: two would append each step twice to one history and
// overwrite each other's checkpoints.
void refuse_if_not_held(const FileLock& lock, const std::filesystem::path& run_dir) {
  if (!lock.held())
    throw ConfigError("--output-dir", "host train: another training is running in " + run_dir.string() +
                                          (lock.holder().empty() ? "" : " (pid " + lock.holder() + ")") +
                                          ": it holds " + (run_dir / "run.lock").string() +
                                          ". Two trainings in one run directory would mix their history and "
                                          "checkpoints; nothing was written. Wait for it to end (then --resume "
                                          "auto continues it), or give this run another --output-dir.");
}

// Whether `history` holds a record: a file with at least one byte (a fresh run creates it empty).
bool holds_records(const std::filesystem::path& history) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(history, ec);
  return !ec && size > 0;
}

// A fresh run never shares a directory with an earlier run's checkpoints (run_identity.h): its
// keep_last would evict its own newer-numbered files first and --resume auto find the other's.
// Returns where --new-run moved the earlier run's files (empty: nothing moved).
std::filesystem::path refuse_or_set_aside_earlier_run(const std::filesystem::path& run_dir, bool new_run) {
  const std::vector<std::string> earlier = checkpoint_names(run_dir);
  if (!earlier.empty() && !new_run) {
    throw ConfigError("--output-dir", "host train: " + (run_dir / "checkpoints").string() +
                                          " holds an earlier run's checkpoints (" + first_few(earlier, 4) + "). A new run there would "
                                          "mix its checkpoints with them; nothing was written. Continue that run with "
                                          "--resume auto, give this one another --output-dir, or pass --new-run to "
                                          "move the earlier run's files into " +
                                          (run_dir / "earlier").string() + "/<UTC time>/ first.");
  }
  if (new_run && !run_files(run_dir).empty()) return set_earlier_run_aside(run_dir);
  return {};
}

// The directories the run writes into are its own: one planted as a symbolic link (by whoever can
// write the run directory) would receive the run's checkpoints, plots, events or, with --new-run,
// the earlier run's files (security trial F6). Refused before anything is written; the writers
// make them with make_own_directory, which refuses a link planted later.
void refuse_planted_directories(const std::filesystem::path& run_dir) {
  for (const char* name : {"checkpoints", "plots", "tensorboard", "mlflow", "earlier"})
    refuse_planted_directory(run_dir / name);
}

// A run directory every user may write: anyone can plant a link or a file in it before the host
// makes its files there (what refuse_planted_directories and O_NOFOLLOW refuse), and remove or
// rename the run's files. Worth a warning, not a refusal: a scratch directory on a personal
// machine is often 0777. Empty when only the owner (or the group) may write.
std::string writable_by_others_warning(const std::filesystem::path& run_dir) {
  struct stat info {};
  if (::stat(run_dir.c_str(), &info) != 0 || (info.st_mode & S_IWOTH) == 0) return "";
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
  return "the run directory " + run_dir.string() + " may be written by every user (mode " + mode +
         "): another user can remove or rename its checkpoints, or plant files and links in it before the run "
         "makes its own. Give the run a directory only you (or your group) may write: chmod o-w " +
         run_dir.string() + ", or another --output-dir.";
}

// The run `--resume FILE` continues, when that is not the run `run_dir` holds: FILE lies outside
// the directory's checkpoints/, the directory holds checkpoints of a recorded run, and FILE was
// saved by another. Empty otherwise (the directory's own file, an empty directory, a file or a
// directory from before identities). Continuing there replaced the directory's last.pt and cut its
// history to the checkpoint's step, with only a warning (security trial F10). Reads FILE once
// more than the run does later (CheckpointError, exit 4, for a file that does not load).
std::string other_run_resumed(const std::filesystem::path& run_dir, const std::string& resume) {
  if (resume.empty() || resume == "auto" || checkpoint_names(run_dir).empty()) return "";
  std::error_code ec;
  const std::filesystem::path own = std::filesystem::weakly_canonical(run_dir / "checkpoints", ec);
  if (std::filesystem::weakly_canonical(resume, ec).parent_path() == own) return "";
  const std::string recorded = read_run_id(run_dir);
  if (recorded.empty()) return "";
  const std::string id = load_checkpoint(resume).run_id;
  return !id.empty() && id != recorded ? id : "";
}

// --resume FILE of another run into a directory holding a run: refused as a fresh run there is,
// nothing written; with --new-run the directory's run moves aside first. Returns where it moved.
std::filesystem::path refuse_or_set_aside_for_resume(const std::filesystem::path& run_dir, const std::string& resume,
                                                     bool new_run) {
  const std::string other = other_run_resumed(run_dir, resume);
  if (other.empty()) return {};
  if (new_run) return set_earlier_run_aside(run_dir);
  throw ConfigError("--resume", "host train --resume: " + resume + " was saved by run " + other + ", and " +
                                    (run_dir / "checkpoints").string() + " holds the checkpoints of another run (" +
                                    first_few(checkpoint_names(run_dir), 4) + "; run.id " + read_run_id(run_dir) +
                                    "). Continuing there would replace that run's last.pt and cut its history to "
                                    "the checkpoint's step; nothing was written. Resume in the checkpoint's own "
                                    "run directory (--output-dir <that directory> --resume auto), give this run "
                                    "another --output-dir (with the same --resume), or move " + run_dir.string() +
                                    "'s run files away first.");
}

}  // namespace

TrainingRunDirectory::TrainingRunDirectory(Session& session, const Options& options)
    : session_(session),
      rank0_(session.place.rank == 0),
      resuming_(!options.resume.empty()),
      config_text_(to_toml_text(session.config.resolved)) {
  const std::filesystem::path& run_dir = session.run_dir;
  const RunConfig& config = session.config;
  Logger& log = session.logger;
  // run.lock: held by rank 0 until this object goes, taken before anything is written.
  if (rank0_) {
    make_run_directory(run_dir);
    try {
      lock_.emplace(run_dir / "run.lock", /*inherit=*/false);
    } catch (const Error& e) { // a read-only directory or lock file: as a directory it cannot create
      throw ConfigError("--output-dir", "host train: cannot use " + run_dir.string() + " as the run directory: " +
                                            e.what() + " Choose another --output-dir (or run.output_dir); nothing "
                                            "was written.");
    }
    refuse_if_not_held(*lock_, run_dir);
    refuse_planted_directories(run_dir);
  }
  // train.fast_dev_run saves no checkpoint, so it may look at any directory. Rank 0 alone judges
  // what the directory holds, and every rank stops with its verdict (run_agreed): a rank 1 that
  // judged too named the busy run's checkpoints and --resume auto or --new-run, beside rank 0's
  // "another training is running", and the launcher named rank 1 (cluster trial F9).
  std::filesystem::path set_aside;
  if (rank0_ && !resuming_ && !config.train.fast_dev_run)
    set_aside = refuse_or_set_aside_earlier_run(run_dir, options.new_run);
  else if (rank0_ && !config.train.fast_dev_run)
    set_aside = refuse_or_set_aside_for_resume(run_dir, options.resume, options.new_run);
  // An attempt killed before its first save left a history and no checkpoint: this run starts
  // fresh (--resume auto finds nothing), and appending to that history gave history.jsonl the dead
  // attempt's records too (43 lines for 32, while history.csv held 33) and MLflow's state a count
  // past them. Its files go aside first, as --new-run moves them; of such attempts earlier/ keeps
  // the newest kKeepEarlierAttempts (a crash-looping job added one per attempt for good, soak F5).
  // A run that reached its end wrote report.toml: one trained without checkpoints
  // (checkpoint.strategy = "no") or whose checkpoints were removed is set aside too, but is no
  // attempt, so pruning never deletes it (review of soak F5).
  std::filesystem::path abandoned;
  bool abandoned_finished = false;
  PrunedAttempts pruned;  // a crash-looping job's attempts beyond the newest kKeepEarlierAttempts
  const bool own_start = options.resume.empty() || options.resume == "auto"; // not a checkpoint from elsewhere
  if (rank0_ && own_start && !config.train.fast_dev_run && set_aside.empty() && checkpoint_names(run_dir).empty() &&
      holds_records(run_dir / "history.jsonl")) {
    std::error_code absent;
    abandoned_finished = std::filesystem::exists(std::filesystem::symlink_status(run_dir / "report.toml", absent));
    abandoned = set_earlier_run_aside(run_dir, /*attempt=*/!abandoned_finished);
    pruned = prune_earlier_attempts(run_dir);
  }
  // Before anything is written: a run.id that is no identity (planted, damaged) refuses the run
  // with "nothing was written" true (config.toml was replaced first, ops trial finding 13).
  recorded_run_id_ = read_run_id(run_dir);
  // Before any dataset runs: a plugin crash then names the component and sample (exit 5).
  install_plugin_crash_handler((run_dir / "checkpoints").string().c_str(), (run_dir / "config.toml").string().c_str());
  try {
    log.open_file(run_dir / "train.log");
    // The trainer opens history.jsonl later (when it writes one, as train.fast_dev_run does not):
    // a FIFO, a link or another user's file in its place is refused now, as train.log's is.
    std::error_code absent;
    if (const auto history = run_dir / "history.jsonl";
        rank0_ && !config.train.fast_dev_run && std::filesystem::exists(std::filesystem::symlink_status(history, absent)))
      ::close(open_for_appending(history));
  } catch (const Error& e) { // a link in its place, a read-only file: the run directory given is unusable
    throw ConfigError("run.output_dir", std::string(e.what()) + " Nothing was written.");
  }
  // config.toml: a fresh run's now (the crash report's `plugins check --config` names it); a
  // resumed run's only once the run is assembled and the checkpoint restored (settle_identity),
  // so a --resume that fails at start-up never replaces the settings that trained with ones that
  // never did.
  if (rank0_) {
    for (const auto& removed : sweep_stale_temporaries(run_dir, /*levels=*/3))
      log.info("removed " + removed.string() + ", left by a process that no longer runs");
    if (!resuming_) write_file_atomically(run_dir / "config.toml", config_text_);
  }
  log.info("run '" + escape_control_characters(config.run.name, /*keep_newlines=*/false) + "' from " + config.source +
           " -> " + run_dir.string());
  if (rank0_)
    if (const std::string warning = writable_by_others_warning(run_dir); !warning.empty()) log.warn(warning);
  if (!set_aside.empty()) log.info("--new-run: the earlier run's files are now in " + set_aside.string());
  if (!abandoned.empty() && abandoned_finished)
    log.warn(run_dir.string() + " held an earlier run's history and report but no checkpoint (trained with "
             "checkpoint.strategy = \"no\", or its checkpoints were removed), so this run starts fresh; that run's "
             "files are now in " + abandoned.string() + ", kept for good (only attempts that stopped before their "
             "first save are pruned)");
  else if (!abandoned.empty())
    log.warn(run_dir.string() + " held an earlier attempt's history but no checkpoint (it stopped before its first "
             "save), so this run starts fresh; that attempt's files (its history, train.log, config.toml) are now in " +
             abandoned.string());
  for (const auto& removed : pruned.removed)
    log.info("removed " + removed.string() + ", an earlier attempt's files: earlier/ keeps the newest " +
             std::to_string(kKeepEarlierAttempts) + " attempts");
  for (const auto& kept : pruned.failed)
    log.warn("could not remove all of " + kept.string() + " (an earlier attempt beyond the newest " +
             std::to_string(kKeepEarlierAttempts) + "); it is left as it is");
  log.file_only("resolved config:\n" + config_text_);
}

void TrainingRunDirectory::prepare_history(bool resumed) const {
  if (resumed || !rank0_) return;
  if (const auto warning = drop_torn_last_line(session_.run_dir / "history.jsonl")) session_.logger.warn(*warning);
}

std::string TrainingRunDirectory::settle_identity(const std::string& checkpoint_run_id,
                                                  const std::filesystem::path& start_path, bool will_train) const {
  const std::filesystem::path& run_dir = session_.run_dir;
  std::string id = checkpoint_run_id;
  if (!id.empty() && !recorded_run_id_.empty() && id != recorded_run_id_)
    session_.logger.warn("--resume: " + start_path.string() + " was saved by run " + id + "; " + run_dir.string() +
                         " held run " + recorded_run_id_ + " (its run.id), and now continues run " + id);
  // A fresh run's identity is new; a checkpoint from before identities continues the directory's.
  if (id.empty()) id = !start_path.empty() && !recorded_run_id_.empty() ? recorded_run_id_ : new_run_id();
  if (rank0_ && !session_.config.train.fast_dev_run) write_run_id(run_dir, id);
  if (rank0_ && resuming_ && will_train) write_file_atomically(run_dir / "config.toml", config_text_);
  return id;
}

}  // namespace tp::cli
