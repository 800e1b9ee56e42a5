// Which run a run directory holds, so that no run resumes from, evicts or mixes with another
// run's checkpoints (docs/run_directory.md, "Run identity"; issue 41, item 9).
//
// A run's identity is 32 random hex digits drawn when it starts fresh. Rank 0 records it in
// `<run dir>/run.id` and every checkpoint the run saves carries it (`run_id`); a run resumed from
// a checkpoint takes the checkpoint's. A fresh `host train` into a directory that already holds
// checkpoints is refused unless `--new-run` sets the earlier run's files aside first
// (set_earlier_run_aside); `--resume auto` passes over checkpoints of another identity.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tp {

/// A new identity: 128 bits from std::random_device as 32 lowercase hex digits.
std::string new_run_id();

/// The identity recorded in `run_dir` (its run.id), or "" when there is none: a new directory, or
/// one written before identities existed. Throws ConfigError("--output-dir") naming the file when
/// run.id exists but does not hold an identity (edited, or another program's file).
std::string read_run_id(const std::filesystem::path& run_dir);

/// Records `id` as `run_dir`'s identity (run.id, written atomically). Rank 0 only.
void write_run_id(const std::filesystem::path& run_dir, const std::string& id);

/// The checkpoints `run_dir/checkpoints` holds (last.pt, best.pt, step-N.pt, best-step-N.pt),
/// by name; temporaries are not checkpoints. Empty when there is no such directory.
std::vector<std::string> checkpoint_names(const std::filesystem::path& run_dir);

/// The files and directories of a run that `host train` and `host eval` write into `run_dir`
/// (checkpoints/, history.jsonl, history.csv, train.log, config.toml, runtime.toml, report.toml,
/// run.id, plots/, tensorboard/, eval_*.json), those that exist. run.lock is not among them.
std::vector<std::filesystem::path> run_files(const std::filesystem::path& run_dir);

/// `--new-run`: moves run_files(run_dir) into `run_dir/earlier/<UTC time>/` (rename, nothing
/// copied or deleted) and returns that directory. The caller holds run.lock. Throws tp::Error
/// naming the file that could not be moved; what moved before it stays moved and is named too.
/// `attempt` = true: the files are those of an attempt that stopped before its first checkpoint
/// (TrainingRunDirectory sets them aside for a fresh start), and the directory is marked as such
/// with a `.torchhost-attempt` file, which prune_earlier_attempts looks for.
std::filesystem::path set_earlier_run_aside(const std::filesystem::path& run_dir, bool attempt = false);

/// How many attempts' directories earlier/ keeps (docs/run_directory.md, "Run identity"): a job
/// crash-looping before its first save, requeued with --resume auto, added one per attempt for
/// good (soak trial F5: 10 attempts, 9 directories, 756 kB). Ten leave the recent failures to read.
inline constexpr int kKeepEarlierAttempts = 10;

/// What prune_earlier_attempts did: the directories removed, and those it could not remove whole.
struct PrunedAttempts {
  std::vector<std::filesystem::path> removed;
  std::vector<std::filesystem::path> failed;
};

/// Removes all but the newest `keep` attempt directories in `run_dir/earlier/`: only those the
/// host made for an attempt, named `<UTC time>` or `<UTC time>-<n>` exactly (YYYYMMDD-HHMMSS) and
/// holding its `.torchhost-attempt` marker as a regular file. A --new-run's directory (an earlier
/// run's checkpoints) and anything else are never touched. Works through directory descriptors
/// opened with O_NOFOLLOW and removes with remove_tree_at, so no link is followed. The caller
/// holds run.lock. Never throws for a file it cannot remove: it is named in `failed`.
PrunedAttempts prune_earlier_attempts(const std::filesystem::path& run_dir, int keep = kKeepEarlierAttempts);

}  // namespace tp
