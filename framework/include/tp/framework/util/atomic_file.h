// Crash-safe file replacement, used for checkpoints, history.csv and config.toml.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string_view>

namespace tp {

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, fsync, rename,
/// fsync of the directory. Throws tp::Error naming the path and the OS error (disk full,
/// permission), after removing the temporary file; the previous `path` is untouched.
void write_file_atomically(const std::filesystem::path& path, const char* bytes, std::size_t size);

/// Convenience overload for text.
inline void write_file_atomically(const std::filesystem::path& path, std::string_view text) {
  write_file_atomically(path, text.data(), text.size());
}

/// Makes `target` name the same content as the finished file `existing`, atomically: a hard link
/// under a temporary name, renamed over `target`, then an fsync of the directory (so one
/// checkpoint written once can be last.pt, step-N.pt and best.pt without writing it three times).
/// Falls back to a full copy (write_file_atomically) where the file system refuses hard links.
/// Throws tp::Error like write_file_atomically; the previous `target` is untouched on failure.
void link_file_atomically(const std::filesystem::path& existing, const std::filesystem::path& target);

}  // namespace tp
