// The temporary files the host's writers leave behind when they are killed (kill -9, the OOM
// killer, a power cut) and how they are swept. Every temporary name ends with the writer's pid:
//   .<name>.<random>.tmp-<pid>     write_file_atomically (atomic_file.h)
//   .<name>.<random>.link-<pid>    link_file_atomically
//   .pending-<pid>.pt              CheckpointManager::save, before its names are linked to it
//   <name>.<random>.partial-<pid>  PredictionWriter (renamed to <name> when the predictions are complete)
// (<random>: twelve characters no other user can predict, so none can plant a link at the name;
// files of earlier versions, without it, are recognised and swept too.)
// The pid tells a leftover from a file another process is writing right now, so sweeping never
// races a concurrent writer (a second `host predict` into the same directory, a sweep's cells).
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

namespace tp {

/// The pid the temporary file name `name` (a file name, no directory) ends with, or -1 when
/// `name` is not one of the names above. Example: temporary_pid(".last.pt.tmp-4242") == 4242,
/// temporary_pid("last.pt") == -1.
long temporary_pid(std::string_view name);

/// Removes the temporaries (names above) in `dir` and in the directories up to `levels` below it
/// (symbolic links are not followed) whose writer no longer runs: kill(pid, 0) says ESRCH. The
/// calling process's own and every live process's are kept; a pid reused by an unrelated process
/// keeps a leftover until that process ends (never a wrong removal). A partial directory
/// (`<name>.partial-<pid>/`, `host predict --format png`) is removed with its contents. Returns
/// the removed paths.
/// Never throws: a directory that cannot be read is passed over. Cost: one walk of those
/// directories, bounded by `levels` so that a run directory set to a large tree (run.output_dir =
/// ".") is not walked whole. Thread safety: [any], but meant for a command's start, before its
/// own writers run. Example: levels = 3 reaches <run>/tune/<trial>/checkpoints/.
std::vector<std::filesystem::path> sweep_stale_temporaries(const std::filesystem::path& dir, int levels);

}  // namespace tp
