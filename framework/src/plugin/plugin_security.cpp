#include "tp/framework/plugin/plugin_security.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tp/framework/error.h"

namespace tp {

std::optional<std::string> insecure_plugin_path_reason(const std::filesystem::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::string("cannot be inspected: ") + std::strerror(errno);
  const uid_t me = ::geteuid();
  if (info.st_uid != me && info.st_uid != 0)
    return "is owned by user id " + std::to_string(info.st_uid) + ", not by you (" + std::to_string(me) + ") or root";
  if ((info.st_mode & S_IWOTH) != 0) return "is writable by every user";
  if ((info.st_mode & S_IWGRP) != 0) return "is writable by its group (gid " + std::to_string(info.st_gid) + ")";
  // Whoever can write a parent directory can rename the plugin (or its directory) away and put
  // their own in its place, unless the sticky bit keeps them to their own entries (/tmp).
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(path, ec);
  if (ec) return "cannot be resolved: " + ec.message();
  for (std::filesystem::path dir = real.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    struct stat parent {};
    if (::stat(dir.c_str(), &parent) != 0) return "lies in " + dir.string() + ", which cannot be inspected: " + std::strerror(errno);
    if (parent.st_uid != me && parent.st_uid != 0)
      return "lies in " + dir.string() + ", owned by user id " + std::to_string(parent.st_uid) + ", not by you (" +
             std::to_string(me) + ") or root";
    if ((parent.st_mode & (S_IWOTH | S_IWGRP)) != 0 && (parent.st_mode & S_ISVTX) == 0)
      return "lies in " + dir.string() + ", which is writable by " +
             ((parent.st_mode & S_IWOTH) != 0 ? std::string("every user") : "its group (gid " + std::to_string(parent.st_gid) + ")") +
             " without the sticky bit, so its entries can be renamed and replaced";
    if (dir == dir.parent_path()) break;
  }
  return std::nullopt;
}

void require_secure_plugin_path(const std::filesystem::path& path, bool allow_insecure) {
  if (allow_insecure) return;
  const std::optional<std::string> reason = insecure_plugin_path_reason(path);
  if (!reason) return;
  throw PluginLoadError("refusing to load plugins from " + path.string() + ": it " + *reason +
                        ", so someone else could have replaced the code that would run. Keep plugins in a "
                        "directory of your own that only you (or root) can write (for one of yours: `chmod go-w "
                        "DIR`; never a shared one such as /tmp), or, for `host`, pass --allow-insecure-plugin-dir "
                        "if you trust everyone who can write there.");
}

}  // namespace tp
