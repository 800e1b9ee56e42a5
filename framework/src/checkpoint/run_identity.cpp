// Run identities and setting an earlier run aside (run_identity.h).
#include "tp/framework/checkpoint/run_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <system_error>

#include "tp/framework/checkpoint/checkpoint_manager.h"
#include "tp/framework/error.h"
#include "tp/framework/util/atomic_file.h"
#include "tp/framework/util/own_directory.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kIdDigits = 32;
// A run.id larger than this is not ours: it is not read whole into a message.
constexpr std::uintmax_t kIdFileLimit = 256;

bool is_run_id(const std::string& text) {
  return text.size() == kIdDigits &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// "20261126-215012": where set_earlier_run_aside puts a run set aside this second.
std::string utc_stamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y%m%d-%H%M%S", &tm);
  return text.data();
}

}  // namespace

std::string new_run_id() {
  std::random_device device;
  std::string id;
  while (id.size() < kIdDigits) {
    std::array<char, 9> word{};
    std::snprintf(word.data(), word.size(), "%08x", static_cast<unsigned>(device()));
    id += word.data();
  }
  return id.substr(0, kIdDigits);
}

std::string read_run_id(const fs::path& run_dir) {
  const fs::path file = run_dir / "run.id";
  std::error_code ec;
  const auto status = fs::symlink_status(file, ec);
  if (ec || status.type() == fs::file_type::not_found) return "";
  const bool regular = status.type() == fs::file_type::regular;
  std::string text;
  if (regular && fs::file_size(file, ec) <= kIdFileLimit && !ec) {
    if (FILE* in = std::fopen(file.c_str(), "rb")) {
      std::array<char, kIdFileLimit + 1> buffer{};
      const std::size_t n = std::fread(buffer.data(), 1, kIdFileLimit, in);
      std::fclose(in);
      text.assign(buffer.data(), n);
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
    }
  }
  if (!is_run_id(text))
    throw ConfigError("--output-dir", file.string() + " should hold the identity of the run in " + run_dir.string() +
                                          " (32 hex digits, written by host train) and does not. Restore it from the "
                                          "run's checkpoints (their run_id) or remove it if this directory holds no "
                                          "run's checkpoints; nothing was written.");
  return text;
}

void write_run_id(const fs::path& run_dir, const std::string& id) { write_file_atomically(run_dir / "run.id", id + "\n"); }

std::vector<std::string> checkpoint_names(const fs::path& run_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir / "checkpoints", ec)) {
    const std::string name = entry.path().filename().string();
    if (is_checkpoint_file_name(name)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<fs::path> run_files(const fs::path& run_dir) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const char* name : {"checkpoints", "history.jsonl", "history.csv", "train.log", "config.toml", "runtime.toml",
                           "report.toml", "run.id", "plots", "tensorboard", "mlflow"})
    if (fs::exists(fs::symlink_status(run_dir / name, ec))) found.push_back(run_dir / name);
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("eval_") && name.ends_with(".json")) found.push_back(entry.path());
  }
  return found;
}

fs::path set_earlier_run_aside(const fs::path& run_dir, bool attempt) {
  const std::string stamp = utc_stamp();
  // earlier/ is made here, never reached through a planted link (security trial F6: the run's
  // files were moved into the link's target); its <UTC time>/ is new, made by mkdir.
  const fs::path earlier = run_dir / "earlier";
  fs::path target = earlier / stamp;
  std::error_code ec;
  try {
    make_own_directory(earlier);
    const auto make = [](const fs::path& dir) { return ::mkdir(dir.c_str(), 0777) == 0 ? 0 : errno; };
    int error = make(target);
    for (int n = 2; error == EEXIST; ++n) error = make(target = earlier / (stamp + "-" + std::to_string(n)));
    if (error != 0) throw Error("cannot create the directory " + target.string() + ": " + std::strerror(error) + ".");
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw Error(std::string("--new-run: ") + e.what() + " Nothing was moved.");
  }
  std::string moved;
  for (const fs::path& file : run_files(run_dir)) {
    fs::rename(file, target / file.filename(), ec);
    if (ec)
      throw Error("--new-run: cannot move " + file.string() + " into " + target.string() + " (" + ec.message() + ")" +
                  (moved.empty() ? "; nothing was moved." : "; moved before it:" + moved) +
                  " Nothing was deleted; move the earlier run's files yourself or give this run another --output-dir.");
    moved += " " + file.filename().string();
  }
  if (attempt) {
    // The mark prune_earlier_attempts removes by: created exclusively in the directory just made,
    // so a --new-run's directory (an earlier run's checkpoints) never carries it. Best effort: an
    // unmarked attempt is only kept for good, as before.
    const int fd = ::open((target / ".torchhost-attempt").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) {
      const std::string text = "An attempt of host train that stopped before its first checkpoint; host train keeps "
                               "the newest " + std::to_string(kKeepEarlierAttempts) + " such directories.\n";
      [[maybe_unused]] const ssize_t written = ::write(fd, text.data(), text.size());
      ::close(fd);
    }
  }
  return target;
}

}  // namespace tp
