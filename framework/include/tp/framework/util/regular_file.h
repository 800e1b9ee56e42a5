// Reading a file the user names as input (a checkpoint, initial weights, an export) whole: only a
// regular file, never a FIFO (open() would wait for a writer for good, deaf to the signals `host
// train` catches) or a device (/dev/zero would be read until memory runs out). The image datasets'
// reader (plugins/datasets/common/image_file.cpp) follows the same rule for samples
// (docs/hardening.md, "Shards" and section 16).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tp/framework/error.h"

namespace tp {

/// Why read_regular_file() read nothing. what() is a clause to follow the file's name in the
/// caller's message: "cannot be opened (No such file or directory)", "is a FIFO, not a regular
/// file", "changed size while it was read (is a process writing it?)". Callers rethrow it as
/// their own error (CheckpointError, ConfigError naming the key) with what to do.
class UnreadableFile : public Error {
 public:
  using Error::Error;
};

/// What a file that is not a regular one is, for a message: "a FIFO", "a character device", "a
/// block device", "a socket", "a directory", else "not a regular file".
const char* file_kind(mode_t mode);

/// The bytes of `path`, read whole. Opened without blocking (O_NONBLOCK, cleared before the read),
/// then fstat: anything but a regular file (a FIFO, a character or block device, a socket, a
/// directory) is refused before a byte is read, a link is followed to what it names. The read
/// is bounded by the size fstat gave; a file that shrinks or grows meanwhile is refused.
/// Throws UnreadableFile. Cost: one allocation of the file's size and one pass of read().
std::vector<char> read_regular_file(const std::filesystem::path& path);

}  // namespace tp
