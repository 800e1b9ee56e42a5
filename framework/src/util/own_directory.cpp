#include "tp/framework/util/own_directory.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "tp/framework/error.h"

namespace tp {
namespace fs = std::filesystem;

void refuse_planted_directory(const fs::path& dir) {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(dir, ec);
  if (!fs::exists(status) || fs::is_directory(status)) return;
  const std::string name = dir.filename().string();
  if (fs::is_symlink(status)) {
    const fs::path target = fs::read_symlink(dir, ec);
    throw ConfigError("run.output_dir",
                      dir.string() + " is a symbolic link" + (ec ? std::string() : " (to " + target.string() + ")") +
                          "; the host never writes a run's " + name + "/ through a link, which could point at any "
                          "directory (a planted link would put the run's files where its planter can read or "
                          "replace them). Nothing was written there. Remove the link (the host makes " + name +
                          "/ itself), or give another output directory.");
  }
  throw ConfigError("run.output_dir", dir.string() + " exists and is not a directory; the host writes the run's " +
                                          name + "/ there. Nothing was written there. Move that file away, or give "
                                          "another output directory.");
}

void make_own_directory(const fs::path& dir) {
  std::error_code ec;
  if (dir.has_parent_path()) fs::create_directories(dir.parent_path(), ec);
  // mkdir never follows a link at its last component: EEXIST then, and the check below refuses it.
  if (::mkdir(dir.c_str(), 0777) != 0) {
    const int error = errno;
    if (error != EEXIST) throw Error("cannot create the directory " + dir.string() + ": " + std::strerror(error) + ".");
  }
  refuse_planted_directory(dir);
}

}  // namespace tp
