// Crash-safe file replacement, used for checkpoints, history.csv, config.toml and every other file
// the host rewrites whole (docs/hardening.md, "Every file the host writes").
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string_view>

namespace tp {

/// A file or directory created for this process alone, beside the one it will become.
struct ExclusiveTemporary {
  std::filesystem::path path;  ///< `<dir>/.<name>.<random><marker><pid>` (or without the dot, see below)
  int fd = -1;                 ///< open for writing (O_CLOEXEC); -1 for a directory
};

/// Creates a new temporary file beside `target` under a name no other user can predict:
/// `<dir>/.<target name>.<12 random characters><marker><pid>` (marker ".tmp-", ".link-" or
/// ".partial-"; the pid last, which sweep_stale_temporaries reads), with O_CREAT | O_EXCL |
/// O_NOFOLLOW, so it is never an existing file and never reached through a link another user
/// planted in a shared directory (docs/hardening.md, section 15). Mode 0666 less the umask, as
/// any tool creates a file: with a team's umask 002 a teammate can continue a run.
/// `hidden` = false leaves the leading dot out (a prediction's partial file, which the user may see).
/// Throws tp::Error naming the directory and the OS error (permission, disk full).
ExclusiveTemporary create_exclusive_temporary(const std::filesystem::path& target, std::string_view marker,
                                              bool hidden = true);

/// The same for a directory (mkdir, which never follows a link either), mode 0755 less the umask
/// whatever the umask allows: a partial directory whose files only this user can then create
/// (they are created by name, so another user must not be able to plant a link there first).
/// `fd` is -1.
ExclusiveTemporary create_exclusive_temporary_directory(const std::filesystem::path& target, std::string_view marker);

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, fsync, rename,
/// fsync of the directory. Throws tp::Error naming the path and the OS error (disk full,
/// permission), after removing the temporary file; the previous `path` is untouched. A `path` that
/// exists and is not a regular file (a directory, a device, a FIFO) is refused, never replaced.
void write_file_atomically(const std::filesystem::path& path, const char* bytes, std::size_t size);

/// Appends bytes to the file being written; throws tp::Error when the write fails.
using AppendBytes = std::function<void(const char* bytes, std::size_t size)>;

/// write_file_atomically for content made in pieces, with no copy of the whole in memory (a
/// checkpoint streamed from its zip writer): `produce` is called once with the function that
/// appends to the temporary file. Whatever `produce` throws (or a failed write) removes the
/// temporary and leaves the previous `path` untouched, then propagates.
void write_file_atomically(const std::filesystem::path& path, const std::function<void(const AppendBytes&)>& produce);

/// Convenience overload for text.
inline void write_file_atomically(const std::filesystem::path& path, std::string_view text) {
  write_file_atomically(path, text.data(), text.size());
}

/// fsyncs the directory `dir`, so a rename, link or removal inside it survives a power cut (the
/// file's own fsync does not cover its name). Best effort: a directory that cannot be opened is
/// left as it is (the rename already happened; only its durability is not forced).
void sync_directory(const std::filesystem::path& dir);

/// Makes `target` name the same content as the finished file `existing`, atomically: a hard link
/// under a temporary name, renamed over `target`, then an fsync of the directory (so one
/// checkpoint written once can be last.pt, step-N.pt and best.pt without writing it three times).
/// Falls back to a full copy (write_file_atomically) where the file system refuses hard links.
/// Throws tp::Error like write_file_atomically; the previous `target` is untouched on failure.
void link_file_atomically(const std::filesystem::path& existing, const std::filesystem::path& target);

}  // namespace tp
