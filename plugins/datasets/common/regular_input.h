// Files a dataset reads through a stream (a CSV listing or table, a list of stems, COCO's JSON,
// MNIST's idx files, a shard description): only a regular file. Opening a FIFO blocks until a
// writer comes, deaf to the signals `host train` catches, and /dev/zero reads for ever (security
// trial F3); image files have their own reader with the same rule (image_file.h).
#pragma once

#include <sys/stat.h>

#include <string>

#include "tp/cpp/guard.h"

namespace tp::datasets {

/// Throws tp::cpp::Failure (TP_ERR_IO) "<component>: '<path>' (<what>) is a FIFO, not a regular
/// file; ..." when `path` names something other than a regular file, links followed (a link to
/// /dev/zero is a device). Nothing when it is one, or does not exist (the caller's open names
/// that). Asked just before the stream opens `path`.
inline void refuse_special_input(const std::string& path, const std::string& component, const std::string& what) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || S_ISREG(info.st_mode)) return;
  const char* kind = S_ISFIFO(info.st_mode)  ? "a FIFO"
                     : S_ISCHR(info.st_mode) ? "a character device"
                     : S_ISBLK(info.st_mode) ? "a block device"
                     : S_ISSOCK(info.st_mode) ? "a socket"
                     : S_ISDIR(info.st_mode)  ? "a directory"
                                              : "not a regular file";
  throw tp::cpp::Failure(TP_ERR_IO, component + ": '" + path + "' (" + what + ") is " + kind +
                                        ", not a regular file; it is read from a regular file only. Give the file itself");
}

}  // namespace tp::datasets
