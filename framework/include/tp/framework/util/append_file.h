// The files a run appends to in its run directory (train.log, history.jsonl), which may be shared
// with other users (a team's output directory).
#pragma once

#include <filesystem>

namespace tp {

/// `file` opened for appending (O_WRONLY | O_APPEND | O_CLOEXEC), created when missing (mode 0666
/// less the umask). Never through a symbolic link (O_NOFOLLOW), never blocking on a FIFO (opened
/// O_NONBLOCK, which is cleared once fstat shows a regular file), and only a regular file this
/// user owns: one another user made beforehand in a shared run directory would let them read
/// everything the run writes to it, and a FIFO planted there hung the run, deaf to SIGTERM
/// (security trial F18, F20). Returns the descriptor; throws Error naming the file, what it is
/// and what to do.
int open_for_appending(const std::filesystem::path& file);

}  // namespace tp
