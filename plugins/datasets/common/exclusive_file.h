// Writing a whole file into a directory other users may reach (a team's cache directory, a shard
// output folder): the temporary is created under a name nobody can predict, exclusively
// (O_CREAT | O_EXCL | O_NOFOLLOW: never an existing file, never through a symbolic link), and
// renamed over the target, which replaces a planted link itself instead of writing through it
// (docs/hardening.md, section 15).
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

namespace tp::datasets {

/// The temporary's name for a write of `target`: `<dir>/.<name>.<random>.tmp-<pid>`, with
/// twelve characters from the system's random source; the pid last, so the framework's sweep of
/// dead processes' temporaries (stale_temporaries.h) recognises it.
std::string temporary_name_for(const std::string& target);

/// Replaces `target` with `bytes`: a new temporary beside it (temporary_name_for, created
/// exclusively, mode 0644 less the umask, retried under a fresh name if one exists), written,
/// fsynced, renamed over `target`. On failure returns the reason ("open: Permission denied",
/// "write: No space left on device") and leaves `target` as it was and no temporary behind; on
/// success returns "".
std::string replace_file_exclusively(const std::string& target, const std::string& bytes);

/// The whole contents of `path`, read without following a final symbolic link or blocking on a
/// FIFO, when it is a regular file of at most `max_bytes` (checked on its size before any byte is
/// read or allocated) and `accept`, when given, takes the opened file's status (its owner and
/// mode, so a check cannot be raced by a rename); nothing when it is not, or cannot be read whole.
/// For files other users may have planted, which the caller then parses as untrusted input.
std::optional<std::string> read_regular_file(const std::string& path, std::size_t max_bytes,
                                             const std::function<bool(const struct stat&)>& accept = nullptr);

}  // namespace tp::datasets
