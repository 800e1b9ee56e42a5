// Files a dataset reads through a stream (a CSV listing or table, a list of stems, COCO's JSON,
// MNIST's idx files, a shard description): only a regular file. Opening a FIFO blocks until a
// writer comes, deaf to the signals `host train` catches, and /dev/zero reads for ever (security
// trial F3); image files are read whole by image_file.h's reader, which names them as file_kind does.
#pragma once

#include <sys/stat.h>

#include <string>

#include "tp/cpp/guard.h"

namespace tp::datasets {

/// What a file that is not a regular one is, for a message: "a FIFO", "a character device", "a
/// block device", "a socket", "a directory", else "not a regular file". (The framework, which the
/// plugins do not link, has its own: tp/framework/util/regular_file.h.)
inline const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

/// Throws tp::cpp::Failure (TP_ERR_IO) "<component>: '<path>' (<what>) is a FIFO, not a regular
/// file; ..." when `path` names something other than a regular file, links followed (a link to
/// /dev/zero is a device). Nothing when it is one, or does not exist (the caller's open names
/// that). Asked just before the stream opens `path`.
inline void refuse_special_input(const std::string& path, const std::string& component, const std::string& what) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || S_ISREG(info.st_mode)) return;
  throw tp::cpp::Failure(TP_ERR_IO, component + ": '" + path + "' (" + what + ") is " + file_kind(info.st_mode) +
                                        ", not a regular file; it is read from a regular file only. Give the file itself");
}

}  // namespace tp::datasets
