// Pruning earlier/'s attempt directories (run_identity.h, prune_earlier_attempts; soak trial F5).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/checkpoint/run_identity.h"
#include "tp/framework/util/remove_tree_at.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

bool digits(const std::string& text, std::size_t from, std::size_t count) {
  if (text.size() < from + count) return false;
  return std::all_of(text.begin() + from, text.begin() + from + count, [](unsigned char c) { return std::isdigit(c); });
}

// "20261126-215012" -> n 1, "20261126-215012-7" -> 7; -1 for any other name (not the host's).
long attempt_number(const std::string& name) {
  if (!digits(name, 0, 8) || name.size() < 15 || name[8] != '-' || !digits(name, 9, 6)) return -1;
  if (name.size() == 15) return 1;
  if (name[15] != '-' || name.size() > 16 + 9 || !digits(name, 16, name.size() - 16) || name[16] == '0') return -1;
  return std::stol(name.substr(16));
}

// Holds the marker set_earlier_run_aside(attempt = true) wrote: a regular file, not a link.
bool is_marked_attempt(int earlier_fd, const std::string& name) {
  const int fd = ::openat(earlier_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st{};
  const bool marked = ::fstatat(fd, ".torchhost-attempt", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
  ::close(fd);
  return marked;
}

}  // namespace

PrunedAttempts prune_earlier_attempts(const fs::path& run_dir, int keep) {
  PrunedAttempts result;
  const fs::path earlier = run_dir / "earlier";
  // earlier/ itself is never a link: TrainingRunDirectory refuses a planted one before this runs.
  const int earlier_fd = ::open(earlier.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (earlier_fd < 0) return result;
  DIR* dir = ::fdopendir(earlier_fd);
  if (dir == nullptr) {
    ::close(earlier_fd);
    return result;
  }
  // (stamp, n, name): the stamp sorts by time, n after it numerically ("-10" after "-9").
  std::vector<std::pair<std::pair<std::string, long>, std::string>> attempts;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    const long n = attempt_number(name);
    if (n > 0 && is_marked_attempt(::dirfd(dir), name)) attempts.push_back({{name.substr(0, 15), n}, name});
  }
  std::sort(attempts.begin(), attempts.end());
  const std::size_t excess = attempts.size() > static_cast<std::size_t>(std::max(0, keep))
                                 ? attempts.size() - static_cast<std::size_t>(std::max(0, keep))
                                 : 0;
  for (std::size_t i = 0; i < excess; ++i) {
    const std::string& name = attempts[i].second;
    (remove_tree_at(::dirfd(dir), name.c_str()) ? result.removed : result.failed).push_back(earlier / name);
  }
  ::closedir(dir);
  return result;
}

}  // namespace tp
