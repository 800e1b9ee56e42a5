#include "tp/framework/util/remove_tree_at.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace tp {

bool remove_tree_at(int dir_fd, const char* name, int depth) {
  struct stat st{};
  if (::fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT;
  if (!S_ISDIR(st.st_mode)) return ::unlinkat(dir_fd, name, 0) == 0 || errno == ENOENT;
  if (depth <= 0) return false;
  // O_NOFOLLOW: a directory replaced by a link since the fstatat fails here instead of being entered.
  const int fd = ::openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    ::close(fd);
    return false;
  }
  std::vector<std::string> entries;  // listed first: removing while readdir walks is unspecified
  while (const dirent* entry = ::readdir(dir))
    if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0) entries.emplace_back(entry->d_name);
  bool all = true;
  for (const auto& entry : entries) all = remove_tree_at(::dirfd(dir), entry.c_str(), depth - 1) && all;
  ::closedir(dir);
  return all && ::unlinkat(dir_fd, name, AT_REMOVEDIR) == 0;
}

}  // namespace tp
