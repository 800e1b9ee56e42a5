// What a command may do to a path the user named for its output (`host predict --output`,
// `host export --output`): the host never removes or replaces anything it did not write
// (docs/hardening.md, "Output paths").
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tp {

/// Refuses (ConfigError on `key`, exit 2) an output file `path` that exists and is not a regular
/// file, or a symbolic link to one: a directory, a character or block device (`/dev/null`), a FIFO,
/// a socket. A regular file is replaced by the caller's rename once the new one is complete; a path
/// that does not exist is created. `what` names the output in the message ("the predictions").
void check_output_file(const std::filesystem::path& path, const std::string& key, const std::string& what);

/// An output directory the host writes whole and replaces whole (`host predict --format png`).
/// It holds `marker`, a file naming what wrote it, beside the files `owned` accepts by name.
struct OutputDirectoryKind {
  std::string marker;                       ///< e.g. ".torchhost-predictions"
  std::string description;                  ///< for messages: "a `host predict --format png` output"
  bool (*owned)(const std::string& name);   ///< a file name this kind of output writes
};

/// The entries of `path` to remove when the new output replaces it: empty when `path` does not
/// exist. Refuses (ConfigError on `key`, exit 2) a `path` that exists and is not a directory of
/// `kind` (its marker and nothing but files `kind.owned` accepts, no subdirectory): the message
/// names the first entry that is not the host's and says to choose a new name or remove it.
std::vector<std::filesystem::path> previous_output_directory(const std::filesystem::path& path, const std::string& key,
                                                             const OutputDirectoryKind& kind);

}  // namespace tp
