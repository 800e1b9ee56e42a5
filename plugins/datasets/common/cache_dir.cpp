#include "cache_dir.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "exclusive_file.h"
#include "tp/cpp/guard.h"

namespace tp::datasets {
namespace {

namespace fs = std::filesystem;
using tp::cpp::Failure;

// A directory's permission bits as `ls -l`'s octal shows them: "0755".
// Whether users other than the owner may write the file or directory (its group or everyone).
bool others_may_write(const struct stat& info) { return (info.st_mode & (S_IWGRP | S_IWOTH)) != 0; }

std::string mode_text(const struct stat& info) {
  char text[16];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(info.st_mode & 07777));
  return text;
}

// The "<mode> owner <uid>" a refused directory's message shows.
std::string mode_and_owner(const struct stat& info) {
  return "mode " + mode_text(info) + ", owner uid " + std::to_string(info.st_uid);
}

// The home directory: $HOME, else the password database's entry for this user.
std::string home_directory() {
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') return home;
  std::vector<char> buffer(16384);
  struct passwd entry {};
  struct passwd* found = nullptr;
  if (::getpwuid_r(::geteuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr &&
      found->pw_dir != nullptr && *found->pw_dir != '\0')
    return found->pw_dir;
  return "";
}

}  // namespace

std::string user_cache_dir(const CacheOwner& owner) {
  const std::string component = owner.component, cache = owner.cache;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  // The XDG spec says a relative $XDG_CACHE_HOME is invalid and to be ignored.
  fs::path base = xdg != nullptr && *xdg == '/' ? fs::path(xdg) : fs::path();
  if (base.empty()) {
    const std::string home = home_directory();
    if (home.empty())
      throw Failure(TP_ERR_IO, component + ": no per-user directory for the " + cache +
                                   " ($XDG_CACHE_HOME and $HOME are unset and this user has no home directory); set "
                                   "`cache_dir`");
    base = fs::path(home) / ".cache";
  }
  const fs::path dir = base / "torchhost";
  std::error_code ec;
  fs::create_directories(base, ec);  // ~/.cache as usual; only our own folder needs to be private
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw Failure(TP_ERR_IO, component + ": cannot create the " + cache + " directory '" + dir.string() + "' (" +
                                 std::strerror(errno) + "); set `cache_dir` to a writable directory or `cache = false`");
  // Whoever can write here chooses what the dataset reads: refuse another user's directory, and
  // one anyone may write to (a shared /tmp-style folder), instead of trusting its files.
  struct stat info {};
  if (::stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    throw Failure(TP_ERR_CONFIG, component + ": the " + cache + " directory '" + dir.string() +
                                     "' is not a directory; remove it or set `cache_dir`");
  if (info.st_uid != ::geteuid() || (info.st_mode & S_IWOTH) != 0)
    throw Failure(TP_ERR_CONFIG, component + ": refusing the " + cache + " directory '" + dir.string() + "' (" +
                                     mode_and_owner(info) + "): it must belong to this user (uid " +
                                     std::to_string(::geteuid()) + ") and not be writable by others, since " +
                                     owner.planted + "; remove it (it is recreated 0700) or set `cache_dir`");
  return dir.string();
}

WriteRefusal shared_write_refusal(const std::string& dir) {
  struct stat info {};
  if (::stat(dir.c_str(), &info) != 0) return {};  // created by this user when first written
  const bool other_owner = info.st_uid != ::geteuid() && info.st_uid != 0;
  const bool others_write = others_may_write(info);
  if (!other_owner && !others_write) return {};
  if (!others_write)
    // A team's cache set up as it should be: one user owns it and prepares it, the others read it.
    return {"it belongs to uid " + std::to_string(info.st_uid) + " (not you, uid " + std::to_string(::geteuid()) +
                ") with mode " + mode_text(info) + ", so it is read only for you: what its owner "
                "prepared there is read (every file checked as untrusted input), and nothing is written",
            false};
  return {"other users can write to it (" + mode_and_owner(info) + "), so a cache there could be replaced or a "
          "link planted in its place, and its content would choose what the dataset reads: nothing there is read "
          "or written, and the data is scanned on every run. Let one user own it with mode 0755 and prepare it, or "
          "set cache_dir to a directory of your own",
          true};
}

std::optional<std::string> read_cache_file(const std::string& path, std::size_t max_bytes) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  struct stat folder {};
  // shared_write_refusal's `warn`, from this one stat: a directory others can write is not read.
  if (::stat(dir.empty() ? "." : dir.c_str(), &folder) != 0 || others_may_write(folder)) return std::nullopt;
  return read_regular_file(path, max_bytes, [&folder](const struct stat& file) {
    const bool trusted_owner = file.st_uid == ::geteuid() || file.st_uid == 0 || file.st_uid == folder.st_uid;
    return trusted_owner && !others_may_write(file);
  });
}

}  // namespace tp::datasets
