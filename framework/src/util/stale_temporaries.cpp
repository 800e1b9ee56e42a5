#include "tp/framework/util/stale_temporaries.h"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <string>

namespace tp {
namespace {

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

bool stale(std::string_view name) {
  const long pid = temporary_pid(name);
  // kill(pid, 0) == 0: alive; EPERM: alive under another user. Only ESRCH means gone.
  return pid > 0 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

long temporary_pid(std::string_view name) {
  if (name.starts_with(".pending-") && name.ends_with(".pt"))
    return pid_after(name.substr(0, name.size() - 3), ".pending-");
  if (name.starts_with(".")) {
    for (const std::string_view marker : std::array<std::string_view, 2>{".tmp-", ".link-"})
      if (const long pid = pid_after(name, marker); pid > 0) return pid;
  }
  return pid_after(name, ".partial-");
}

std::vector<std::filesystem::path> sweep_stale_temporaries(const std::filesystem::path& dir, int levels) {
  namespace fs = std::filesystem;
  std::vector<fs::path> removed;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code ignored;
    const bool directory = it->is_directory(ignored);
    if (directory && it.depth() >= levels) it.disable_recursion_pending();
    // A partial directory (`host predict --format png`) goes as a whole, unvisited.
    const std::string name = it->path().filename().string();
    if (directory && name.find(".partial-") != std::string::npos && stale(name)) {
      it.disable_recursion_pending();
      if (fs::remove_all(it->path(), ignored) > 0) removed.push_back(it->path());
      continue;
    }
    if (!it->is_regular_file(ignored) || !stale(name)) continue;
    if (fs::remove(it->path(), ignored)) removed.push_back(it->path());
  }
  return removed;
}

}  // namespace tp
