#include "tp/framework/util/stale_temporaries.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <string>

namespace tp {
namespace fs = std::filesystem;
namespace {

// Length of the random part atomic_file.cpp's random_tag() puts before the marker.
constexpr std::size_t kRandomLength = 12;

// The digits after `marker` up to the end of `name`, as a pid; -1 when they are not one.
long pid_after(std::string_view name, std::string_view marker) {
  const std::size_t at = name.rfind(marker);
  if (at == std::string_view::npos) return -1;
  const std::string_view digits = name.substr(at + marker.size());
  long pid = -1;
  if (digits.empty() || digits.size() > 9) return -1;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  return error == std::errc{} && end == digits.data() + digits.size() && pid > 0 ? pid : -1;
}

// Whether `name` is `<prefix><target>.<random><marker><pid>`: a target name of at least one
// character, then twelve letters and digits, as create_exclusive_temporary names them.
bool has_random_part(std::string_view name, std::string_view prefix, std::string_view marker) {
  const std::size_t at = name.rfind(marker);
  if (!name.starts_with(prefix) || at == std::string_view::npos || at < prefix.size()) return false;
  const std::string_view stem = name.substr(prefix.size(), at - prefix.size());
  if (stem.size() < kRandomLength + 2) return false;
  const std::string_view random = stem.substr(stem.size() - kRandomLength);
  return stem[stem.size() - kRandomLength - 1] == '.' &&
         std::all_of(random.begin(), random.end(), [](char c) {
           return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
         });
}

bool stale(std::string_view name) {
  const long pid = temporary_pid(name);
  // kill(pid, 0) == 0: alive; EPERM: alive under another user. Only ESRCH means gone.
  return pid > 0 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// A partial directory the host's prediction writer made and a killed one left: its marker and
// regular files alone, or nothing (killed right after the mkdir). Anything else is not the host's.
bool holds_only_host_output(const fs::path& dir) {
  std::error_code ec;
  bool marked = false, empty = true;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_error;
    if (!fs::is_regular_file(it->symlink_status(type_error))) return false;
    marked = marked || it->path().filename() == kPartialDirectoryMarker;
    empty = false;
  }
  return !ec && (marked || empty);
}

// Whether the sweep enters `dir`, a real directory inside `parent`: where the host writes
// temporaries (see the header), never a user's own sub-tree.
bool host_writes_in(const fs::path& dir, const fs::path& parent) {
  static constexpr std::array<std::string_view, 5> kRunSubdirectories{"checkpoints", "plots", "tensorboard", "mlflow",
                                                                      "tune"};
  const std::string name = dir.filename().string();
  if (std::find(kRunSubdirectories.begin(), kRunSubdirectories.end(), name) != kRunSubdirectories.end()) return true;
  if (parent.filename() == "tune") return true; // tune's scratch directories (tune/batch-<time>/)
  std::error_code ec;
  return fs::is_regular_file(fs::symlink_status(dir / "run.lock", ec));
}

void sweep(const fs::path& dir, int levels, std::vector<fs::path>& removed) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end; !ec && it != end;
       it.increment(ec)) {
    const fs::path path = it->path();
    const std::string name = path.filename().string();
    std::error_code ignored;
    const fs::file_status status = it->symlink_status(ignored); // a link is what it is, never its target
    if (fs::is_directory(status)) {
      if (name.find(".partial-") != std::string::npos && stale(name)) {
        // A partial directory (`host predict --format png`) goes as a whole, unvisited.
        if (holds_only_host_output(path) && fs::remove_all(path, ignored) > 0) removed.push_back(path);
      } else if (levels > 0 && host_writes_in(path, dir)) {
        sweep(path, levels - 1, removed);
      }
    } else if (fs::is_regular_file(status) && stale(name) && fs::remove(path, ignored)) {
      removed.push_back(path);
    }
  }
}

}  // namespace

long temporary_pid(std::string_view name) {
  if (name.starts_with(".pending-") && name.ends_with(".pt"))
    return pid_after(name.substr(0, name.size() - 3), ".pending-");
  for (const std::string_view marker : std::array<std::string_view, 2>{".tmp-", ".link-"})
    if (has_random_part(name, ".", marker)) return pid_after(name, marker);
  return has_random_part(name, "", ".partial-") ? pid_after(name, ".partial-") : -1;
}

std::vector<fs::path> sweep_stale_temporaries(const fs::path& dir, int levels) {
  std::vector<fs::path> removed;
  sweep(dir, levels, removed);
  return removed;
}

}  // namespace tp
