// The directories a run writes into inside its run directory (checkpoints/, plots/, tensorboard/,
// mlflow/, earlier/): made by the host itself and never reached through a symbolic link. A link
// planted there by whoever can write the run directory would put the run's checkpoints, plots and
// events wherever it points, readable or replaceable by the planter (security trial F6).
#pragma once

#include <filesystem>
#include <string>

namespace tp {

/// Makes `dir` a directory when it does not exist (mkdir of its last component, 0777 less the
/// umask; its parents with create_directories, as any path the user chose). Throws ConfigError
/// (key "run.output_dir", exit 2) when `dir` is a symbolic link, even to a directory, or anything
/// else but a directory: the message names it, where the link points and what to do. Throws
/// tp::Error naming `dir` when it cannot be made (no permission, a read-only file system).
/// Example: make_own_directory(run_dir / "checkpoints") before the first save.
void make_own_directory(const std::filesystem::path& dir);

/// make_own_directory()'s refusal without making anything: throws the same ConfigError when
/// `dir` exists and is a symbolic link or not a directory; a missing `dir` is fine. For the
/// run's start, before anything is written.
void refuse_planted_directory(const std::filesystem::path& dir);

}  // namespace tp
