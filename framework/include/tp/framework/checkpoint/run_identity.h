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
std::filesystem::path set_earlier_run_aside(const std::filesystem::path& run_dir);

}  // namespace tp
