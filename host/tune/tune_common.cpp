#include "tune/tune_common.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <deque>
#include <fstream>

#include "tp/framework/amp/precision.h"
#include "tp/framework/config/load.h"
#include "tp/framework/dist/rendezvous.h"
#include "tp/framework/engine/runtime_setup.h"
#include "tp/framework/error.h"

namespace tp::cli {

namespace fs = std::filesystem;

std::unique_ptr<Session> open_tune_session(const Options& options, const std::vector<std::string>& tune_sets,
                                           const std::string& what) {
  const auto env = process_environment();
  if (read_rendezvous(env).distributed())
    throw ConfigError("", what + " runs once and starts its trial runs itself; it was started as one rank of a "
                                 "distributed job (RANK/WORLD_SIZE are set: torchrun, or a launcher). Start it as a "
                                 "plain `host tune ...`: train.batch_size is per process, so one process measures it.");
  auto session = open_session(options);
  // On CUDA the children check the precision themselves: checking here would create a CUDA
  // context in this process, which holds device memory for as long as the tune runs.
  if (const c10::Device device = session->device(); device.is_cpu())
    check_precision_supported(session->config.amp.precision, device);
  std::vector<std::string> sets = options.sets;
  sets.insert(sets.end(), tune_sets.begin(), tune_sets.end());
  try {
    load_run_config(options.config, sets, env);
  } catch (const ConfigError& e) {
    throw ConfigError(e.key_path(), what + " trains its trial runs with " + std::to_string(tune_sets.size()) +
                                        " settings of its own, and with them the configuration fails: " + e.what());
  }
  return session;
}

ScratchDir::ScratchDir(const fs::path& run_dir, const std::string& name) {
  std::error_code ec;
  // Ends at an existing directory ("/" at the latest) or at the start of a relative path.
  for (fs::path dir = run_dir / "tune"; !dir.empty() && !fs::exists(dir, ec); dir = dir.parent_path())
    created_.push_back(dir);
  parent_ = created_.empty() ? run_dir / "tune" : created_.back().parent_path();
  if (parent_.empty()) parent_ = ".";
  struct stat info {};
  if (::stat(parent_.c_str(), &info) == 0) {
    parent_times_[0] = info.st_atim;
    parent_times_[1] = info.st_mtim;
  }
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  const fs::path base = run_dir / "tune" / (name + "-" + stamp);
  path_ = base;
  for (int k = 2; fs::exists(path_, ec); ++k) path_ = base.string() + "-" + std::to_string(k);
  fs::create_directories(path_, ec);
  if (ec)
    throw Error("host tune: cannot create the scratch directory " + path_.string() + ": " + ec.message() +
                ". Give a writable run directory with --output-dir.");
}

void ScratchDir::discard() noexcept {
  std::error_code ec;
  fs::remove_all(path_, ec);
  // Innermost first; fs::remove refuses a directory that is not empty, which then stays.
  for (const fs::path& dir : created_) fs::remove(dir, ec);
  if (parent_times_[1].tv_sec != 0) ::utimensat(AT_FDCWD, parent_.c_str(), parent_times_, 0);
}

std::vector<std::string> child_train_command(const Options& options, const std::vector<std::string>& tune_sets,
                                             const fs::path& out_dir) {
  std::vector<std::string> args{"host", "train", "--config", options.config};
  for (const std::string& set : options.sets) args.insert(args.end(), {"--set", set});
  for (const std::string& set : tune_sets) args.insert(args.end(), {"--set", set});
  args.insert(args.end(), {"--output-dir", out_dir.string()});
  for (const std::string& dir : options.plugin_dirs) args.insert(args.end(), {"--plugin-dir", dir});
  if (options.allow_insecure_plugin_dir) args.emplace_back("--allow-insecure-plugin-dir");
  return args;
}

std::string tail_of(const fs::path& file, int lines) {
  std::ifstream in(file);
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string out;
  for (const std::string& line : last) out += "    " + line + "\n";
  return out;
}

int stopped_before_start(const std::string& what, int signal) {
  std::fprintf(stderr, "%s: stopped by signal %d before it started; nothing was written.\n", what.c_str(), signal);
  return exit_code_for_signal(signal);
}

std::string short_float(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1e", value);
  return text;
}

}  // namespace tp::cli
