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

}  // namespace tp
