#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <utility>

#include "tp/framework/util/write_fully.h"
#include "tp/framework/util/atomic_file.h"
#include "tp/framework/error.h"
#include "tp/framework/util/write_error.h"

namespace tp {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what, int error, const std::string& tmp) {
  if (!tmp.empty()) ::unlink(tmp.c_str());
  throw Error("cannot write " + path.string() + ": " + what + " failed: " + describe_write_error(error) +
              " The previous version of the file, if any, is unchanged.");
}

/// Refuses to replace `path` when it exists and is not a regular file (or a link to one): a
/// rename over a device, a FIFO or a socket would replace the node itself (`/dev/null` as root).
void refuse_special_file(const std::filesystem::path& path) {
  std::error_code ignored;
  const std::filesystem::file_status status = std::filesystem::status(path, ignored);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw Error("cannot write " + path.string() + ": it exists and is not a regular file (a directory, a device, a "
                "FIFO or a socket), which the host never replaces. It is unchanged; choose another path.");
}

// Twelve characters of [A-Za-z0-9] from the system's random source (71 bits): no other user can
// plant a link at the name in advance.
std::string random_tag() {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device source;
  std::uniform_int_distribution<int> pick(0, static_cast<int>(sizeof kAlphabet) - 2);
  std::string tag(12, '\0');
  for (char& c : tag) c = kAlphabet[pick(source)];
  return tag;
}

// Calls `create(name)` (returns 0 or an errno) on fresh temporary names beside `target` until one
// is new: EEXIST only when random names collide, which a guess cannot cause. Returns the last name
// tried and 0, or the error that stopped it.
template <typename Create>
std::pair<std::filesystem::path, int> try_unique(const std::filesystem::path& target, std::string_view marker,
                                                 bool hidden, Create create) {
  const std::filesystem::path dir = target.parent_path().empty() ? "." : target.parent_path();
  std::filesystem::path name;
  int error = EEXIST;
  for (int attempt = 0; attempt < 8 && error == EEXIST; ++attempt) {
    name = dir / ((hidden ? "." : "") + target.filename().string() + "." + random_tag() + std::string(marker) +
                  std::to_string(::getpid()));
    error = create(name);
  }
  return {name, error};
}

// try_unique that throws tp::Error (naming the directory) when no temporary could be created.
template <typename Create>
std::filesystem::path create_unique(const std::filesystem::path& target, std::string_view marker, bool hidden,
                                    Create create) {
  auto [name, error] = try_unique(target, marker, hidden, create);
  if (error != 0) fail(target, "creating a temporary in " + name.parent_path().string(), error, "");
  return name;
}

}  // namespace

ExclusiveTemporary create_exclusive_temporary(const std::filesystem::path& target, std::string_view marker, bool hidden) {
  ExclusiveTemporary made;
  made.path = create_unique(target, marker, hidden, [&](const std::filesystem::path& name) {
    // 0666 less the umask, as any tool creates a file: a team's run directory (umask 002) needs
    // its files group-writable for a teammate to continue the run.
    made.fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    return made.fd >= 0 ? 0 : errno;
  });
  return made;
}

ExclusiveTemporary create_exclusive_temporary_directory(const std::filesystem::path& target, std::string_view marker) {
  ExclusiveTemporary made;
  // 0755, not 0777 less the umask as for a file: its writer then creates files in it by name
  // (fopen), so no one else may place a link in it first, even with a team's umask 002.
  made.path = create_unique(target, marker, /*hidden=*/false,
                            [](const std::filesystem::path& name) { return ::mkdir(name.c_str(), 0755) == 0 ? 0 : errno; });
  return made;
}

void sync_directory(const std::filesystem::path& dir) {
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd); // makes a rename or a removal in `dir` itself durable
    ::close(dir_fd);
  }
}

void link_file_atomically(const std::filesystem::path& existing, const std::filesystem::path& target) {
  refuse_special_file(target);
  const std::filesystem::path dir = target.parent_path().empty() ? "." : target.parent_path();
  // link() never follows a link at its new name either: an unpredictable name only has to be new.
  const auto [linked, error] = try_unique(target, ".link-", /*hidden=*/true, [&](const std::filesystem::path& name) {
    return ::link(existing.c_str(), name.c_str()) == 0 ? 0 : errno;
  });
  const std::string tmp = linked.string();
  if (error == 0) {
    if (::rename(tmp.c_str(), target.c_str()) != 0) fail(target, "rename", errno, tmp);
    sync_directory(dir);
    return;
  }
  if (error != EXDEV && error != EPERM && error != EMLINK && error != ENOTSUP)
    fail(target, "link(" + existing.string() + ")", error, "");
  std::ifstream in(existing, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) fail(target, "read(" + existing.string() + ")", EIO, "");
  write_file_atomically(target, bytes.data(), bytes.size());
}

void write_file_atomically(const std::filesystem::path& path, const std::function<void(const AppendBytes&)>& produce) {
  refuse_special_file(path);
  const std::filesystem::path dir = path.parent_path().empty() ? "." : path.parent_path();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  // Same directory as the target, so rename() is atomic (never crosses a file system).
  const ExclusiveTemporary temporary = create_exclusive_temporary(path, ".tmp-");
  const std::string tmp = temporary.path.string();
  const int fd = temporary.fd;
  try {
    produce([&](const char* bytes, std::size_t size) {
      if (const int error = write_fully(fd, bytes, size); error != 0) fail(path, "write", error, ""); // the catch removes it
    });
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  // fsync before rename: otherwise a power cut can leave a renamed but empty file.
  if (::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    fail(path, "fsync", error, tmp);
  }
  if (::close(fd) != 0) fail(path, "close", errno, tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail(path, "rename", errno, tmp);
  sync_directory(dir);
}

void write_file_atomically(const std::filesystem::path& path, const char* bytes, std::size_t size) {
  write_file_atomically(path, [&](const AppendBytes& append) { append(bytes, size); });
}

}  // namespace tp
