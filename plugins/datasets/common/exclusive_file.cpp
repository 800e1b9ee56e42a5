#include "exclusive_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

namespace tp::datasets {
namespace {

namespace fs = std::filesystem;

// Twelve characters of [A-Za-z0-9] from the system's random source: 71 bits another user
// cannot guess, so no link can be planted at the name in advance.
std::string random_tag() {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device source;
  std::uniform_int_distribution<int> pick(0, static_cast<int>(sizeof kAlphabet) - 2);
  std::string tag(12, '\0');
  for (char& c : tag) c = kAlphabet[pick(source)];
  return tag;
}

std::string failed(const char* step, int error) { return std::string(step) + ": " + std::strerror(error); }

}  // namespace

std::string temporary_name_for(const std::string& target) {
  const fs::path path(target);
  const fs::path dir = path.parent_path();
  return (dir / ("." + path.filename().string() + "." + random_tag() + ".tmp-" + std::to_string(::getpid()))).string();
}

std::string replace_file_exclusively(const std::string& target, const std::string& bytes) {
  std::string temporary;
  int fd = -1;
  // EEXIST only when a name collides, which a guess cannot cause: a few fresh names suffice.
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    temporary = temporary_name_for(target);
    // 0644, not 0666 less the umask as the run's files: a cache file chooses what a dataset reads,
    // so only its writer may change it, even in a team's directory under umask 002 (cache_dir.h).
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) return failed("open", errno);
  }
  if (fd < 0) return failed("open", EEXIST);
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : ENOSPC;
      ::close(fd);
      ::unlink(temporary.c_str());
      return failed("write", error);
    }
    written += static_cast<std::size_t>(n);
  }
  // fsync before rename: a power cut must not leave a renamed but empty cache.
  const int sync_error = ::fsync(fd) == 0 ? 0 : errno;
  const int close_error = ::close(fd) == 0 ? 0 : errno;
  if (sync_error != 0 || close_error != 0) {
    ::unlink(temporary.c_str());
    return sync_error != 0 ? failed("fsync", sync_error) : failed("close", close_error);
  }
  if (::rename(temporary.c_str(), target.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    return failed("rename", error);
  }
  return "";
}

std::optional<std::string> read_regular_file(const std::string& path, std::size_t max_bytes,
                                             const std::function<bool(const struct stat&)>& accept) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat info {};
  std::optional<std::string> text;
  if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && static_cast<uint64_t>(info.st_size) <= max_bytes &&
      (!accept || accept(info))) {
    text.emplace(static_cast<std::size_t>(info.st_size), '\0');
    std::size_t filled = 0;
    while (text && filled < text->size()) {
      const ssize_t n = ::read(fd, text->data() + filled, text->size() - filled);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) text.reset();  // an error, or the file shrank meanwhile
      else filled += static_cast<std::size_t>(n);
    }
  }
  ::close(fd);
  return text;
}

}  // namespace tp::datasets
