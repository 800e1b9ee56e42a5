// The temporary files the host's writers leave behind when they are killed (kill -9, the OOM
// killer, a power cut) and how they are swept. Every temporary name ends with the writer's pid:
//   .<name>.<random>.tmp-<pid>     write_file_atomically (atomic_file.h)
//   .<name>.<random>.link-<pid>    link_file_atomically
//   .pending-<pid>.pt              CheckpointManager::save, before its names are linked to it
//   <name>.<random>.partial-<pid>  PredictionWriter (renamed to <name> when the predictions are complete)
// (<random>: twelve letters and digits no other user can predict, so none can plant a link at the
// name.) The pid tells a leftover from a file another process is writing right now, so sweeping
// never races a concurrent writer (a second `host predict` into the same directory, a sweep's
// cells). The random part tells the host's temporaries from a user's own files: a name without it
// (`figures.partial-2023/`, `.todo.md.tmp-4242`) is never one (security trial F14).
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

namespace tp {

/// The file a partial directory (`<name>.<random>.partial-<pid>/`, `host predict --format png`)
/// holds from its start: the sweep removes such a directory only when it holds this file (or
/// nothing), so that it never removes a directory of someone else's whole.
inline constexpr std::string_view kPartialDirectoryMarker = ".torchhost-predictions";

/// The pid the temporary file name `name` (a file name, no directory) ends with, or -1 when
/// `name` is not one of the names above. Example: temporary_pid(".last.pt.k3J9sQx0Lm2B.tmp-4242")
/// == 4242; temporary_pid(".last.pt.tmp-4242") == -1 (no random part: not the host's);
/// temporary_pid("last.pt") == -1.
long temporary_pid(std::string_view name);

/// Removes the temporaries (names above) whose writer no longer runs (kill(pid, 0) says ESRCH) in
/// `dir` and, up to `levels` below it, in the directories the host writes temporaries in: those
/// named checkpoints, plots, tensorboard, mlflow and tune, what tune/ holds, and other run
/// directories of the host (a directory holding run.lock: a sweep's cell, a tune trial). Other
/// directories (a project's sub-trees when run.output_dir is ".") are not entered. A symbolic
/// link is never followed, nor removed: only regular files and, for a partial directory, a real
/// directory holding kPartialDirectoryMarker and regular files alone (removed with its contents)
/// or nothing. The calling process's own and every live process's are kept; a pid reused by an
/// unrelated process keeps a leftover until that process ends (never a wrong removal). Returns
/// the removed paths.
/// Never throws: a directory that cannot be read is passed over. Cost: one listing of each
/// directory entered. Thread safety: [any], but meant for a command's start, before its own
/// writers run. Example: levels = 3 reaches <run>/tune/batch-<time>/b4/ (b4 holds run.lock) and
/// <sweep dir>/<cell>/checkpoints/; each such run's own start sweeps it whole.
std::vector<std::filesystem::path> sweep_stale_temporaries(const std::filesystem::path& dir, int levels);

}  // namespace tp
